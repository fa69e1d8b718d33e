// Placeholder until the trace component lands.
#include <stash/trace/minimalloc_reader.hpp>
int main() { return 0; }
