// Runs gnuplot on a script written by write_plot_inputs: a child process started in the
// script's directory (so the script's relative data and PNG names resolve there, exactly as
// when a person reruns it), with its stdout and stderr kept in gnuplot.log beside it.
#pragma once
#include <string>

namespace stoa::app::plot {

// The path of an executable: `program` itself when it contains a '/', else the first match on
// PATH. Empty when there is none.
std::string find_executable(const std::string& program);

// Runs `gnuplot <script>` in the script's directory and waits. Throws kNotFound when gnuplot is
// not installed (naming the Debian package), kIo when it cannot be started or exits non-zero
// (with the end of its log). Returns the log's path.
std::string run_gnuplot(const std::string& gnuplot, const std::string& script);

}  // namespace stoa::app::plot
