// Runs gnuplot on a script written by write_plot_inputs: a child process started in the
// script's directory (so the script's relative data and PNG names resolve there, exactly as
// when a person reruns it), with its stdout and stderr kept in gnuplot.log beside it.
#pragma once
#include <string>

#include "core/process.h"

namespace stoa::app::plot {

using stoa::find_executable;  // core/process.h: `program` itself with a '/', else from PATH

// Runs `gnuplot <script>` in the script's directory and waits. Throws kNotFound when gnuplot is
// not installed (naming the Debian package), kIo when it cannot be started or exits non-zero
// (with the end of its log). Returns the log's path.
std::string run_gnuplot(const std::string& gnuplot, const std::string& script);

}  // namespace stoa::app::plot
