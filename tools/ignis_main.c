/* ignis_main.c — main() of the ignis binary: the command line of tools/ignis.c. (A one-file bundle
 * has its own main, tools/bundle_main.c, around the same command line.) */
#include "cli_args.h"

int main(int argc, char **argv) { return ignis_cli_main(argc, argv); }
