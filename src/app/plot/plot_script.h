// `stoa plot` output: the data files gnuplot reads and the gnuplot script that draws the charts,
// written into the output directory so a chart can be regenerated or restyled by hand
// (`cd OUTDIR && gnuplot plot.gp`) without rerunning anything. Several runs share each chart,
// one line per run, titled with the run's label (for ablations).
#pragma once
#include <string>
#include <vector>

#include "app/plot/plot_data.h"

namespace stoa::app::plot {

struct PlotFiles {
  std::string script;               // OUTDIR/plot.gp
  std::vector<std::string> data;    // the .dat files the script reads
  std::vector<std::string> charts;  // the PNGs the script will write
};

// Writes the data files and the script into out_dir (created if missing). Charts whose data no
// run has (pass@1 without eval JSONs) are left out. Paths returned are out_dir-joined.
PlotFiles write_plot_inputs(const std::vector<RunData>& runs, const std::string& out_dir);

// A label as a gnuplot single-quoted string: no escapes inside, a quote is doubled.
std::string gnuplot_quote(const std::string& text);

// A file-name-safe form of a label ("r1-<label>" keeps runs with equal labels apart).
std::string file_slug(size_t index, const std::string& label);

}  // namespace stoa::app::plot
