// stash-plan: summarises stash traces (v1) and MiniMalloc instances: sizes, the lower bound on
// memory (peak live bytes) and where it happens, offset planners against that bound, swap
// policies under a budget, a picture of the iteration, and the projected time to train on a
// cluster for every data-parallel x model-parallel configuration. See usage() for the interface.
//
// Layout (tools/include/stash_tools/stash_plan/): options.hpp parses the command line; report.hpp
// reads and analyses one input into a file_report (sections from planners.hpp, policies.hpp,
// svg.hpp); print.hpp prints a report as text or JSON; this file only wires them together and loops
// over the inputs.
#include <stash_tools/stash_plan/print.hpp>
#include <stash_tools/stash_plan/report.hpp>

#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int exit_ok        = 0;
constexpr int exit_bad_input = 1;  // at least one input could not be read
constexpr int exit_usage     = 2;  // bad command line

void usage(std::ostream& out)
{
  out << "usage: stash-plan [OPTIONS] FILE...\n"
         "\n"
         "Summarises each FILE: a stash trace (format \"stash-trace v1\") or a MiniMalloc CSV\n"
         "(\"id,lower,upper,size\"; chosen by a .csv extension or that header line).\n"
         "Reports storages, ops, events, the lower bound on memory (peak live bytes) and where\n"
         "it occurs (event, phase, op), activation bytes and bytes per storage kind; for a CSV,\n"
         "the buffer count, the lower bound and the capacity from a <name>.<capacity>.csv name.\n"
         "\n"
         "Planners: each FILE is also planned by the greedy and the search offset planner; every\n"
         "plan is checked. Reported: footprint, alpha = footprint / L (L = peak live bytes with\n"
         "sizes padded to the alignment), planning time, the search nodes used and the best\n"
         "plan. Traces are planned with 256-B alignment and compared with a caching pool\n"
         "replaying the same allocations; CSVs are planned byte-exact with the capacity as the\n"
         "search's target. The search stops on nodes and on work (nodes weighted by the size\n"
         "of their subproblem; "
      << stash::default_search_work / 1'000'000
      << " M by default, about 1 s), not on time, so its plans\n"
         "are the same on any machine and load.\n"
         "  --search-nodes N   node budget of the search planner per FILE (default "
      << stash::default_search_nodes
      << "; 0: greedy\n"
         "                     plan only)\n"
         "  --search-ms N      safety cap on the search's wall time per FILE, off by default (0:\n"
         "                     none); a search it cuts short is reported as such (\"time_capped\"\n"
         "                     in JSON) and its plan may differ from run to run\n"
         "  --no-times         leave out measured wall times (the planners' time, \"plan_ms\"), "
         "so\n"
         "                     that the same inputs and options print the same bytes\n"
         "  --no-redrop        `search` does not let a storage a re-run reads leave again right\n"
         "                     after that read (joint_search::redrop, on by default: a second\n"
         "                     copy, or a redrop of the host copy; --redrop, the default, is\n"
         "                     accepted)\n"
         "\n"
         "Swap policies (traces; only when --policy or --budget is given): each policy's\n"
         "schedule for the budget, simulated against no_swap: fits, planned and simulated device\n"
         "peak, offloaded bytes, iteration time, stalls and the longest ones.\n"
         "  --policy NAME|all  a policy to run (repeatable); default with --budget: all. Known:\n"
         "                     ";
  std::size_t column = 21;
  for (auto const name : stash::swap_policy_names()) {
    if (column + name.size() > 90) {
      out << "\n                     ";
      column = 21;
    }
    out << name << ' ';
    column += name.size() + 1;
  }
  out << "\n"
         "  --budget SIZE      device memory budget: bytes with an optional unit (KiB, MiB, GiB,\n"
         "                     KB, MB, GB; e.g. 6GiB, 512MB), or a percentage of the no_swap\n"
         "                     peak (e.g. 70%); default: the hardware preset's device memory\n"
         "  --hw PRESET        hardware for the simulation (default pcie3_x16); presets:\n";
  for (auto const& hw : stash::hardware_presets) {
    // The description up to its first parenthesis names the GPU and link; the rest is sources.
    auto const description = hw.description.substr(0, hw.description.find(" ("));
    out << "                       " << hw.name << ": " << description << "\n";
  }
  out << "  --codec NAME       offloads pass through a codec, NAME being a label (e.g. zvc); give\n"
         "  --ratio R          its fixed compression ratio (uncompressed / compressed bytes), or\n"
         "  --activations FILE...  raw float32 files to measure the ratio of the host zvc codec\n"
         "                     on (implies --codec zvc); --activations takes every FILE up to the\n"
         "                     next option, so put it after the inputs or end it with --\n"
         "  --codec auto       per-tensor encodings: each swapped storage gets the encoding the\n"
         "                     trace allows (zvc for ReLU-like outputs, Gist's 1-bit mask where\n"
         "                     readers need only the sign or the values are a 0/1 Bernoulli\n"
         "                     draw, a 1-bit range mask where hardtanh's backward (ReLU6)\n"
         "                     alone reads a copy, 4-bit argmax for max-pool indices, raw\n"
         "                     otherwise; lossless), chosen for every policy's schedule and\n"
         "                     searched with by search_swap; the choice and bytes per encoding\n"
         "                     are printed (JSON \"encodings\"); with --activations FILE... zvc's\n"
         "                     ratio is measured, else 1.6 is assumed\n"
         "  --lossy KIND=ENC[,KIND=ENC...]  opt in to reduced precision (lossy) for a storage\n"
         "                     kind: activations=fp16|bf16|fp8_e4m3 lets every policy's schedule\n"
         "                     (and search_swap's and search's searches) send activations no\n"
         "                     lossless encoding covers in that format; implies --codec auto;\n"
         "                     parameters, gradients, optimizer state stay lossless. Default:\n"
         "                     lossless only\n"
         "\n"
         "Multi-device projection (traces; only with --cluster): every data-parallel x\n"
         "model-parallel configuration of the trace on the cluster, with and without a swap\n"
         "policy: per-device peak, step time (pipeline, all-reduce, offload stall), epochs and\n"
         "predicted time to train; the best is the fitting one with the least time to train.\n"
         "Every time is predicted by stash's cost model, not measured.\n"
         "  --cluster SPEC     the cluster, comma-separated key=value: nodes, gpus (per node),\n"
         "                     intra (link preset: nvlink, nvlink4, nvlink3, pcie, pcie4, pcie5),\n"
         "                     intra_gbps, intra_latency_us, inter_gbps (required when nodes > "
         "1),\n"
         "                     latency_us, hw (device preset, default h100_sxm); e.g.\n"
         "                     nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5\n"
         "  --gns S_MIN,B_NOISE  statistical efficiency, gradient-noise form: steps(B) =\n"
         "                     S_MIN (1 + B_NOISE / B) at global batch B; or\n"
         "  --epochs-table B:E,B:E,...  epochs to target E at global batch B (log-linear between\n"
         "                     rows; batches outside the table have no time to train).\n"
         "                     One of the two is required with --cluster.\n"
         "  --dataset N        samples per epoch (default 1281167, ImageNet-1k)\n"
         "  --replica-batch N  samples per replica and step (default: the trace's batch)\n"
         "  --micro-batches N  pipeline micro-batches when mp > 1 (default 4; must divide the\n"
         "                     replica batch)\n"
         "  --max-mp N         largest model-parallel degree tried (default 8)\n"
         "  With --cluster, --budget is also the per-device budget of the projection (a\n"
         "  percentage: of the trace's no_swap peak at its recorded batch; default: the cluster\n"
         "  device's memory), --codec/--ratio apply to its offloads, and --hw does not apply\n"
         "  (give hw=PRESET in SPEC).\n"
         "\n"
         "Frontier (traces):\n"
         "  --frontier         every policy (or those given with --policy) at budgets from the\n"
         "                     lowest bound to the no_swap peak in 5% steps, plus the bounds\n"
         "                     (swap of activations, swap of any storage, memory with\n"
         "                     recompute) and 1.05x each, simulated with the budget enforced:\n"
         "                     predicted ms per budget and policy ('-': does not fit) and the\n"
         "                     time lower bounds (swap only; any keep/swap/recompute schedule);\n"
         "                     JSON \"frontier\": [{policy, budget_bytes, fits, iteration_ms,\n"
         "                     offloaded_bytes}] and \"frontier_bounds\"; with --svg also\n"
         "                     FILE-frontier.svg (time against budget, one line per policy)\n"
         "  --threads N        plan the frontier's policies, budgets and bounds on N threads,\n"
         "                     and --policy search's constructions and local searches\n"
         "                     (default: the machine's hardware threads, at most 8; 1: one\n"
         "                     after the other); the output is the same for any N\n"
         "\n"
         "Picture:\n"
         "  --svg FILE         write an SVG of the iteration: device memory over simulated time,\n"
         "                     stacked by storage kind (with the budget line and the no_swap\n"
         "                     curve against the drawn policy when a policy is given; with "
         "several\n"
         "                     policies the fastest that fits), above the compute, D2H and H2D\n"
         "                     streams. With several FILEs, FILE gets each input's stem appended\n"
         "                     (out.svg -> out_vgg16_b32.svg). With --cluster, the projection's\n"
         "                     picture (time to train against devices, one line per MP degree,\n"
         "                     the best ringed) goes beside it with \"-projection\" before the\n"
         "                     extension (out.svg -> out-projection.svg,\n"
         "                     out_vgg16_b32-projection.svg).\n"
         "\n"
         "Output:\n"
         "  --json      print one JSON object per FILE, one per line (JSON Lines), in argument\n"
         "              order, with at least \"file\", \"format\", \"tensors\",\n"
         "              \"lower_bound_bytes\", \"activation_bytes\" (null for a CSV), "
         "\"planners\"\n"
         "              (name, footprint_bytes, alpha, plan_ms; for the search also search_nodes,\n"
         "              node_budget and time_capped), \"best\", for traces \"caching_pool\",\n"
         "              for CSVs \"capacity_bytes\", with a policy \"swap\" and \"policies\",\n"
         "              with --cluster \"projection\"\n"
         "              (cluster, devices, budget_bytes, assumptions, best: index or null) and\n"
         "              \"configs\" (one object per configuration: dp, mp, devices,\n"
         "              global_batch, policy, fits, offload, device_peak_bytes, step_ms, ...,\n"
         "              epochs_to_target, time_to_train_s, best)\n"
         "  -h, --help  print this help and exit\n"
         "  --          treat every later argument as a FILE\n"
         "\n"
         "A FILE that cannot be read or is malformed is reported on stderr as FILE:LINE: what\n"
         "(a NUL byte or a line over 16 MiB too: /dev/zero is not a trace)\n"
         "(with --json also as {\"file\":..., \"error\":...} on stdout); the other FILEs are\n"
         "still processed. A trace that reads but looks cut short (activations, temporaries\n"
         "or gradients never freed) or whose phases go back (backward -> forward) gets a\n"
         "'warning' line (JSON \"warnings\") and is still summarised.\n"
         "Exit status: 0 if every FILE was summarised, 1 if any failed, 2 on a usage error.\n";
}

}  // namespace

int main(int argc, char** argv)
{
  stash_plan::options opt;
  try {
    opt = stash_plan::parse_args(std::vector<std::string>(argv + 1, argv + argc));
  } catch (stash_plan::usage_error const& e) {
    std::cerr << "stash-plan: " << e.what() << "\n\n";
    usage(std::cerr);
    return exit_usage;
  }
  if (opt.help) {
    usage(std::cout);
    return exit_ok;
  }
  if (opt.files.empty()) {
    std::cerr << "stash-plan: no input files\n\n";
    usage(std::cerr);
    return exit_usage;
  }

  int status = exit_ok;
  bool first = true;
  for (auto const& file : opt.files) {
    auto report    = stash_plan::analyze_file(file, opt);
    auto write_svg = [&](std::string const& path,
                         std::string const& svg) -> std::optional<std::string> {
      std::ofstream out(path);
      out << svg;
      out.close();
      if (!out) {
        std::cerr << "stash-plan: " << path << ": cannot write the SVG\n";
        status = exit_bad_input;
        return std::nullopt;
      }
      return path;
    };
    if (opt.svg) {
      auto const path = stash_plan::svg_path(*opt.svg, file, opt.files.size() > 1);
      if (report.svg) { report.svg_file = write_svg(path, *report.svg); }
      if (report.frontier_svg) {
        report.frontier_svg_file =
            write_svg(stash_plan::frontier_svg_path(path), *report.frontier_svg);
      }
      if (report.projection_svg) {
        report.projection_svg_file =
            write_svg(stash_plan::projection_svg_path(path), *report.projection_svg);
      }
    }
    if (report.error) {
      std::cerr << "stash-plan: " << *report.error << '\n';
      status = exit_bad_input;
    }
    if (opt.json) {
      stash_plan::print_json(std::cout, report, opt.times);
    } else if (!report.error) {
      if (!first) { std::cout << '\n'; }
      stash_plan::print_text(std::cout, report, opt.times);
      first = false;
    }
  }
  std::cout.flush();
  return status;
}
