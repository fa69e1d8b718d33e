#include "test_main.hpp"

int main(int argc, char** argv) { return stash::test::run_tests(argc, argv); }
