#include "driver/cli.h"

int main(int argc, char** argv) { return remora::driver::run_cli(argc, argv); }
