// stash-plan: summarises stash traces (v1) and MiniMalloc instances: sizes, the lower bound on
// memory (peak live bytes) and where it happens. See usage() for the interface.
//
// Layout: report.hpp reads and analyses one input into a file_report; print.hpp prints a report
// as text or JSON; this file only parses the command line and loops over the inputs.
#include "print.hpp"
#include "report.hpp"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

constexpr int exit_ok        = 0;
constexpr int exit_bad_input = 1;  // at least one input could not be read
constexpr int exit_usage     = 2;  // bad command line

void usage(std::ostream& out)
{
  out << "usage: stash-plan [--json] FILE...\n"
         "\n"
         "Summarises each FILE: a stash trace (format \"stash-trace v1\") or a MiniMalloc CSV\n"
         "(\"id,lower,upper,size\"; chosen by a .csv extension or that header line).\n"
         "Reports storages, ops, events, the lower bound on memory (peak live bytes) and where\n"
         "it occurs (event, phase, op), activation bytes and bytes per storage kind; for a CSV,\n"
         "the buffer count, the lower bound and the capacity from a <name>.<capacity>.csv name.\n"
         "\n"
         "  --json      print one JSON object per FILE, one per line (JSON Lines), in argument\n"
         "              order, with at least \"file\", \"format\", \"tensors\",\n"
         "              \"lower_bound_bytes\" and \"activation_bytes\" (null for a CSV)\n"
         "  -h, --help  print this help and exit\n"
         "  --          treat every later argument as a FILE\n"
         "\n"
         "A FILE that cannot be read or is malformed is reported on stderr as FILE:LINE: what\n"
         "(with --json also as {\"file\":..., \"error\":...} on stdout); the other FILEs are\n"
         "still processed.\n"
         "Exit status: 0 if every FILE was summarised, 1 if any failed, 2 on a usage error.\n";
}

}  // namespace

int main(int argc, char** argv)
{
  bool json = false;
  std::vector<std::string> files;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (!options_done && arg == "--") {
      options_done = true;
    } else if (!options_done && (arg == "-h" || arg == "--help")) {
      usage(std::cout);
      return exit_ok;
    } else if (!options_done && arg == "--json") {
      json = true;
    } else if (!options_done && arg.size() > 1 && arg[0] == '-') {
      std::cerr << "stash-plan: unknown option '" << arg << "'\n";
      usage(std::cerr);
      return exit_usage;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::cerr << "stash-plan: no input files\n";
    usage(std::cerr);
    return exit_usage;
  }

  int status = exit_ok;
  bool first = true;
  for (auto const& file : files) {
    auto const report = stash_plan::analyze_file(file);
    if (report.error) {
      std::cerr << "stash-plan: " << *report.error << '\n';
      status = exit_bad_input;
    }
    if (json) {
      stash_plan::print_json(std::cout, report);
    } else if (!report.error) {
      if (!first) { std::cout << '\n'; }
      stash_plan::print_text(std::cout, report);
      first = false;
    }
  }
  std::cout.flush();
  return status;
}
