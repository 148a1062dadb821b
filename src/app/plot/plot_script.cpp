#include "app/plot/plot_script.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace stoa::app::plot {
namespace fs = std::filesystem;

namespace {

// Numbers as gnuplot reads them; NaN (a metric missing from the log, or a byte count of 0 on a
// log axis) is written as "NaN", which `set datafile missing "NaN"` turns into a gap.
std::string fmt(double v) {
  if (std::isnan(v) || std::isinf(v)) return "NaN";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

double positive_or_nan(double v) {
  return v > 0 ? v : std::nan("");
}

struct Writer {
  std::string dir;
  PlotFiles* files;

  std::ofstream open(const std::string& name) {
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream out(path);
    STOA_CHECK(out.good(), ErrorKind::kIo, "plot: cannot write ", path);
    files->data.push_back(path);
    return out;
  }
};

// Exponential moving average over roughly a tenth of the run: the raw per-step reward of a
// few groups is too noisy to read a trend from.
std::vector<double> smoothed(const std::vector<StepPoint>& steps) {
  const double window = std::max(1.0, static_cast<double>(steps.size()) / 10.0);
  const double alpha = 2.0 / (window + 1.0);
  std::vector<double> out;
  double ema = std::nan("");
  for (const auto& s : steps) {
    if (!std::isnan(s.reward_mean))
      ema = std::isnan(ema) ? s.reward_mean : ema + alpha * (s.reward_mean - ema);
    out.push_back(ema);
  }
  return out;
}

void write_steps(Writer& w, const RunData& run, const std::string& name) {
  auto out = w.open(name);
  out << "# " << run.label << ": " << run.steps_path << "\n"
      << "# wall clock: " << clock_source_name(run.clock) << "\n"
      << "# 1:step 2:version 3:wall_s 4:reward_mean 5:reward_ema 6:masked_fraction "
         "7:masked_fraction_pos 8:masked_fraction_neg 9:tv_mean 10:tv_max 11:kl_mean 12:kl_max "
         "13:busy_fraction 14:step_seconds 15:patch_bytes 16:anchor_bytes\n";
  const auto ema = smoothed(run.steps);
  for (size_t i = 0; i < run.steps.size(); i++) {
    const auto& s = run.steps[i];
    out << s.step << ' ' << (s.version >= 0 ? std::to_string(s.version) : "NaN") << ' '
        << fmt(s.wall_s) << ' ' << fmt(s.reward_mean) << ' ' << fmt(ema[i]) << ' '
        << fmt(s.masked_fraction) << ' ' << fmt(s.masked_fraction_pos) << ' '
        << fmt(s.masked_fraction_neg) << ' ' << fmt(s.tv_mean) << ' ' << fmt(s.tv_max) << ' '
        << fmt(s.kl_mean) << ' ' << fmt(s.kl_max) << ' ' << fmt(s.busy_fraction) << ' '
        << fmt(s.step_seconds) << ' ' << fmt(positive_or_nan(s.patch_bytes)) << ' '
        << fmt(positive_or_nan(s.anchor_bytes)) << '\n';
  }
}

// The held-out curve: every eval except the test split, which is reported once at the end and
// is not a point on the learning curve.
bool on_curve(const EvalPoint& e) {
  return e.split != "test";
}

void write_evals(Writer& w, const RunData& run, const std::string& name) {
  auto out = w.open(name);
  out << "# " << run.label << ": pass@1 from eval JSONs\n# 1:step 2:wall_s 3:pass1 4:file\n";
  for (const auto& e : run.evals)
    if (on_curve(e))
      out << e.step << ' ' << fmt(e.wall_s) << ' ' << fmt(e.pass1) << " \"" << e.file << "\"\n";
}

// One row per staleness (versions behind), one column per run: the share of that run's
// trained groups, so runs of different lengths compare.
void write_staleness(Writer& w, const std::vector<RunData>& runs, const std::string& name) {
  std::set<int64_t> behind;
  std::vector<std::map<int64_t, int64_t>> totals(runs.size());
  std::vector<double> sums(runs.size(), 0);
  for (size_t r = 0; r < runs.size(); r++)
    for (const auto& s : runs[r].steps)
      for (const auto& [k, n] : s.staleness_histogram) {
        behind.insert(k);
        totals[r][k] += n;
        sums[r] += static_cast<double>(n);
      }
  auto out = w.open(name);
  out << "# share of trained groups by staleness (versions behind); columns 2.. are runs\n"
      << "# behind";
  for (size_t r = 0; r < runs.size(); r++) out << ' ' << file_slug(r, runs[r].label);
  out << '\n';
  for (const int64_t k : behind) {
    out << k;
    for (size_t r = 0; r < runs.size(); r++)
      out << ' ' << fmt(sums[r] > 0 ? static_cast<double>(totals[r][k]) / sums[r] : 0.0);
    out << '\n';
  }
}

struct Chart {
  std::string png;
  std::string body;  // set/plot commands after the output is set
};

std::string axis_time(double max_wall, const char* col, std::string* xlabel) {
  // Minutes once a run is longer than a few minutes: "3000 s" reads worse than "50 min".
  if (max_wall > 300) {
    *xlabel = "wall-clock (minutes)";
    return cat("($", col, "/60.0)");
  }
  *xlabel = "wall-clock (seconds)";
  return cat("($", col, ")");
}

}  // namespace

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += "''";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

std::string file_slug(size_t index, const std::string& label) {
  std::string slug = "r";
  slug += std::to_string(index + 1);
  slug += '-';
  for (const char c : label) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    slug += ok ? c : '_';
  }
  return slug.substr(0, 64);
}

PlotFiles write_plot_inputs(const std::vector<RunData>& runs, const std::string& out_dir) {
  STOA_CHECK(!runs.empty(), ErrorKind::kInvalidArgument, "plot: no runs to plot");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  STOA_CHECK(fs::is_directory(out_dir), ErrorKind::kIo, "plot: cannot create output directory ",
             out_dir, ec ? ": " + ec.message() : "");
  PlotFiles files;
  Writer w{out_dir, &files};

  std::vector<std::string> steps_dat, evals_dat;
  bool any_evals = false, any_patches = false, any_staleness = false;
  double max_wall = 0;
  for (size_t r = 0; r < runs.size(); r++) {
    const std::string slug = file_slug(r, runs[r].label);
    steps_dat.push_back(slug + ".steps.dat");
    write_steps(w, runs[r], steps_dat.back());
    evals_dat.push_back(slug + ".evals.dat");
    write_evals(w, runs[r], evals_dat.back());
    for (const auto& e : runs[r].evals) {
      any_evals |= on_curve(e);
      max_wall = std::max(max_wall, e.wall_s);
    }
    for (const auto& s : runs[r].steps) {
      any_patches |= s.patch_bytes > 0 || s.anchor_bytes > 0;
      any_staleness |= !s.staleness_histogram.empty();
      if (!std::isnan(s.wall_s)) max_wall = std::max(max_wall, s.wall_s);
    }
  }
  if (any_staleness) write_staleness(w, runs, "staleness.dat");

  // One "plot" clause per run for a series; untitled clauses share the titled one's colour.
  auto per_run = [&](const std::vector<std::string>& dats, const std::string& using_cols,
                     const std::string& style, bool titled) {
    std::string s;
    for (size_t r = 0; r < runs.size(); r++) {
      if (!s.empty()) s += ", \\\n     ";
      s += cat(gnuplot_quote(dats[r]), " using ", using_cols, " with ", style, " lc ", r + 1,
               titled ? " title " + gnuplot_quote(runs[r].label) : std::string(" notitle"));
    }
    return s;
  };
  std::string tlabel;
  const std::string tcol = axis_time(max_wall, "2", &tlabel);  // evals: wall is column 2
  const std::string scol = axis_time(max_wall, "3", &tlabel);  // steps: wall is column 3
  const bool single = runs.size() == 1;

  std::vector<Chart> charts;
  if (any_evals) {
    charts.push_back({"pass1_vs_step.png",
                      "set title 'held-out pass@1'\nset xlabel 'trainer step'\n"
                      "set ylabel 'pass@1'\nset yrange [0:1]\nplot " +
                          per_run(evals_dat, "1:3", "linespoints pt 7 ps 1.5", true)});
    charts.push_back({"pass1_vs_time.png",
                      "set title 'held-out pass@1'\nset xlabel '" + tlabel +
                          "'\nset ylabel 'pass@1'\nset yrange [0:1]\nplot " +
                          per_run(evals_dat, tcol + ":3", "linespoints pt 7 ps 1.5", true)});
  }
  const std::string reward_plot = per_run(steps_dat, "{x}:4", "lines lw 1 dt 3", false) +
                                  ", \\\n     " + per_run(steps_dat, "{x}:5", "lines lw 2.5", true);
  auto with_x = [](std::string s, const std::string& x) {
    for (size_t p; (p = s.find("{x}")) != std::string::npos;) s.replace(p, 3, x);
    return s;
  };
  charts.push_back({"reward_vs_step.png",
                    "set title 'mean reward of trained groups (dotted: per step, solid: moving "
                    "average)'\nset xlabel 'trainer step'\nset ylabel 'reward'\nplot " +
                        with_x(reward_plot, "1")});
  charts.push_back({"reward_vs_time.png",
                    "set title 'mean reward of trained groups (dotted: per step, solid: moving "
                    "average)'\nset xlabel '" +
                        tlabel + "'\nset ylabel 'reward'\nplot " + with_x(reward_plot, scol)});
  std::string masked = per_run(steps_dat, "1:6", "lines lw 2", true);
  if (single)
    masked += ", \\\n     " + gnuplot_quote(steps_dat[0]) +
              " using 1:7 with lines dt 2 lc 2 title 'positive advantage', \\\n     " +
              gnuplot_quote(steps_dat[0]) +
              " using 1:8 with lines dt 3 lc 3 title 'negative advantage'";
  charts.push_back({"masked_fraction.png",
                    "set title 'DPPO masked token fraction'\nset xlabel 'trainer step'\n"
                    "set ylabel 'fraction of tokens masked'\nplot " +
                        masked});
  charts.push_back(
      {"tv_kl.png",
       "set multiplot layout 2,1 title 'policy divergence between trainer and rollout policy "
       "(solid: mean, dashed: max)'\nset xlabel 'trainer step'\nset ylabel 'TV'\nplot " +
           per_run(steps_dat, "1:9", "lines lw 2", true) + ", \\\n     " +
           per_run(steps_dat, "1:10", "lines dt 2", false) + "\nset ylabel 'KL'\nplot " +
           per_run(steps_dat, "1:11", "lines lw 2", true) + ", \\\n     " +
           per_run(steps_dat, "1:12", "lines dt 2", false) + "\nunset multiplot"});
  if (any_staleness) {
    std::string bars;
    for (size_t r = 0; r < runs.size(); r++)
      bars += cat(r ? ", \\\n     " : "", "'staleness.dat' using ", r + 2, r ? "" : ":xtic(1)",
                  " lc ", r + 1, " title ", gnuplot_quote(runs[r].label));
    charts.push_back({"staleness.png",
                      "set title 'staleness of trained groups (all steps)'\n"
                      "set xlabel 'versions behind the trainer'\n"
                      "set ylabel 'share of trained groups'\nset yrange [0:*]\n"
                      "set style data histograms\nset style histogram clustered gap 1\n"
                      "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
                      "plot " +
                          bars});
  }
  if (any_patches) {
    std::string patches;
    for (size_t r = 0; r < runs.size(); r++) {
      const std::string q = gnuplot_quote(steps_dat[r]);
      patches += cat(r ? ", \\\n     " : "", q, " using 2:15 with linespoints pt 7 ps 0.6 lc ",
                     r + 1, " title ", gnuplot_quote(runs[r].label + ": patch"), ", \\\n     ", q,
                     " using 2:16 with points pt 5 ps 1.8 lc ", r + 1, " title ",
                     gnuplot_quote(runs[r].label + ": anchor"));
    }
    charts.push_back({"patch_bytes.png",
                      "set title 'PULSE bytes published per version (squares: full anchors)'\n"
                      "set xlabel 'weights version'\nset ylabel 'bytes'\nset logscale y\n"
                      "set format y '%.0s %cB'\nplot " +
                          patches});
  }
  charts.push_back({"busy_fraction.png",
                    "set title 'trainer busy fraction (compute / wall time per step)'\n"
                    "set xlabel 'trainer step'\nset ylabel 'busy fraction'\nset yrange [0:1.05]\n"
                    "plot " +
                        per_run(steps_dat, "1:13", "lines lw 2", true)});

  files.script = (fs::path(out_dir) / "plot.gp").string();
  std::ofstream gp(files.script);
  STOA_CHECK(gp.good(), ErrorKind::kIo, "plot: cannot write ", files.script);
  gp << "# Written by `stoa plot`; regenerate the charts with: cd <this directory> && gnuplot "
        "plot.gp\n# runs:\n";
  for (size_t r = 0; r < runs.size(); r++)
    gp << "#   " << runs[r].label << ": " << runs[r].steps_path << " (" << runs[r].steps.size()
       << " steps, " << runs[r].evals.size() << " evals, wall clock "
       << clock_source_name(runs[r].clock) << ")\n";
  // pngcairo draws anti-aliased lines; the libgd png terminal is the fallback on builds
  // without cairo. noenhanced: labels are printed as given (an '_' is not a subscript).
  gp << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
        "  set terminal pngcairo noenhanced size 1100,650 font ',11'\n"
        "} else {\n"
        "  set terminal png noenhanced size 1100,650\n"
        "}\n";
  // `reset` restores every setting but the terminal, so each chart starts from the same state.
  for (const auto& c : charts) {
    gp << "\nreset\nset datafile missing 'NaN'\nset key outside right top\nset grid\n"
          // Headroom above autoscaled data, so a flat maximum is not hidden by the border.
          "set offsets 0, 0, graph 0.05, 0\n"
       << "set output " << gnuplot_quote(c.png) << "\n"
       << c.body << "\nunset output\n";
    files.charts.push_back((fs::path(out_dir) / c.png).string());
  }
  gp.close();
  STOA_CHECK(gp.good(), ErrorKind::kIo, "plot: cannot write ", files.script);
  return files;
}

}  // namespace stoa::app::plot
