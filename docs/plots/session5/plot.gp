# Written by `stoa plot`; regenerate the charts with: cd <this directory> && gnuplot plot.gp
# runs:
#   T0.7+skip (24 min, --full): /tmp/exp/D/run/steps.jsonl (239 steps, 2 evals, wall clock elapsed_s)
#   T0.7+skip (20 min): /tmp/exp/C/run/steps.jsonl (201 steps, 2 evals, wall clock elapsed_s)
#   T0.7 (20 min): /tmp/exp/A/run/steps.jsonl (224 steps, 2 evals, wall clock elapsed_s)
#   T1.0 (2026-11-30 evening, 20 min): /tmp/full4/run/steps.jsonl (210 steps, 2 evals, wall clock elapsed_s)
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo noenhanced size 1100,650 font ',11'
} else {
  set terminal png noenhanced size 1100,650
}

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'pass1_vs_step.png'
set title 'held-out pass@1'
set xlabel 'trainer step'
set ylabel 'pass@1'
set yrange [0:1]
plot 'r1-T0.7_skip__24_min__--full_.evals.dat' using 1:3 with linespoints pt 7 ps 1.5 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.evals.dat' using 1:3 with linespoints pt 7 ps 1.5 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.evals.dat' using 1:3 with linespoints pt 7 ps 1.5 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.evals.dat' using 1:3 with linespoints pt 7 ps 1.5 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'pass1_vs_time.png'
set title 'held-out pass@1'
set xlabel 'wall-clock (minutes)'
set ylabel 'pass@1'
set yrange [0:1]
plot 'r1-T0.7_skip__24_min__--full_.evals.dat' using ($2/60.0):3 with linespoints pt 7 ps 1.5 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.evals.dat' using ($2/60.0):3 with linespoints pt 7 ps 1.5 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.evals.dat' using ($2/60.0):3 with linespoints pt 7 ps 1.5 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.evals.dat' using ($2/60.0):3 with linespoints pt 7 ps 1.5 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'reward_vs_step.png'
set title 'mean reward of trained groups (dotted: per step, solid: moving average)'
set xlabel 'trainer step'
set ylabel 'reward'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:4 with lines lw 1 dt 3 lc 1 notitle, \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:4 with lines lw 1 dt 3 lc 2 notitle, \
     'r3-T0.7__20_min_.steps.dat' using 1:4 with lines lw 1 dt 3 lc 3 notitle, \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:4 with lines lw 1 dt 3 lc 4 notitle, \
     'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:5 with lines lw 2.5 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:5 with lines lw 2.5 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using 1:5 with lines lw 2.5 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:5 with lines lw 2.5 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'reward_vs_time.png'
set title 'mean reward of trained groups (dotted: per step, solid: moving average)'
set xlabel 'wall-clock (minutes)'
set ylabel 'reward'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using ($3/60.0):4 with lines lw 1 dt 3 lc 1 notitle, \
     'r2-T0.7_skip__20_min_.steps.dat' using ($3/60.0):4 with lines lw 1 dt 3 lc 2 notitle, \
     'r3-T0.7__20_min_.steps.dat' using ($3/60.0):4 with lines lw 1 dt 3 lc 3 notitle, \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using ($3/60.0):4 with lines lw 1 dt 3 lc 4 notitle, \
     'r1-T0.7_skip__24_min__--full_.steps.dat' using ($3/60.0):5 with lines lw 2.5 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using ($3/60.0):5 with lines lw 2.5 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using ($3/60.0):5 with lines lw 2.5 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using ($3/60.0):5 with lines lw 2.5 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'masked_fraction.png'
set title 'DPPO masked token fraction'
set xlabel 'trainer step'
set ylabel 'fraction of tokens masked'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:6 with lines lw 2 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:6 with lines lw 2 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using 1:6 with lines lw 2 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:6 with lines lw 2 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'tv_kl.png'
set multiplot layout 2,1 title 'policy divergence between trainer and rollout policy (solid: mean, dashed: max)'
set xlabel 'trainer step'
set ylabel 'TV'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:9 with lines lw 2 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:9 with lines lw 2 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using 1:9 with lines lw 2 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:9 with lines lw 2 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)', \
     'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:10 with lines dt 2 lc 1 notitle, \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:10 with lines dt 2 lc 2 notitle, \
     'r3-T0.7__20_min_.steps.dat' using 1:10 with lines dt 2 lc 3 notitle, \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:10 with lines dt 2 lc 4 notitle
set ylabel 'KL'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:11 with lines lw 2 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:11 with lines lw 2 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using 1:11 with lines lw 2 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:11 with lines lw 2 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)', \
     'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:12 with lines dt 2 lc 1 notitle, \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:12 with lines dt 2 lc 2 notitle, \
     'r3-T0.7__20_min_.steps.dat' using 1:12 with lines dt 2 lc 3 notitle, \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:12 with lines dt 2 lc 4 notitle
unset multiplot
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'staleness.png'
set title 'staleness of trained groups (all steps)'
set xlabel 'versions behind the trainer'
set ylabel 'share of trained groups'
set yrange [0:*]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
plot 'staleness.dat' using 2:xtic(1) lc 1 title 'T0.7+skip (24 min, --full)', \
     'staleness.dat' using 3 lc 2 title 'T0.7+skip (20 min)', \
     'staleness.dat' using 4 lc 3 title 'T0.7 (20 min)', \
     'staleness.dat' using 5 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'patch_bytes.png'
set title 'PULSE bytes published per version (squares: full anchors)'
set xlabel 'weights version'
set ylabel 'bytes'
set logscale y
set format y '%.0s %cB'
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 2:15 with linespoints pt 7 ps 0.6 lc 1 title 'T0.7+skip (24 min, --full): patch', \
     'r1-T0.7_skip__24_min__--full_.steps.dat' using 2:16 with points pt 5 ps 1.8 lc 1 title 'T0.7+skip (24 min, --full): anchor', \
     'r2-T0.7_skip__20_min_.steps.dat' using 2:15 with linespoints pt 7 ps 0.6 lc 2 title 'T0.7+skip (20 min): patch', \
     'r2-T0.7_skip__20_min_.steps.dat' using 2:16 with points pt 5 ps 1.8 lc 2 title 'T0.7+skip (20 min): anchor', \
     'r3-T0.7__20_min_.steps.dat' using 2:15 with linespoints pt 7 ps 0.6 lc 3 title 'T0.7 (20 min): patch', \
     'r3-T0.7__20_min_.steps.dat' using 2:16 with points pt 5 ps 1.8 lc 3 title 'T0.7 (20 min): anchor', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 2:15 with linespoints pt 7 ps 0.6 lc 4 title 'T1.0 (2026-11-30 evening, 20 min): patch', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 2:16 with points pt 5 ps 1.8 lc 4 title 'T1.0 (2026-11-30 evening, 20 min): anchor'
unset output

reset
set datafile missing 'NaN'
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set output 'busy_fraction.png'
set title 'trainer busy fraction (compute / wall time per step)'
set xlabel 'trainer step'
set ylabel 'busy fraction'
set yrange [0:1.05]
plot 'r1-T0.7_skip__24_min__--full_.steps.dat' using 1:13 with lines lw 2 lc 1 title 'T0.7+skip (24 min, --full)', \
     'r2-T0.7_skip__20_min_.steps.dat' using 1:13 with lines lw 2 lc 2 title 'T0.7+skip (20 min)', \
     'r3-T0.7__20_min_.steps.dat' using 1:13 with lines lw 2 lc 3 title 'T0.7 (20 min)', \
     'r4-T1.0__2026-11-30_evening__20_min_.steps.dat' using 1:13 with lines lw 2 lc 4 title 'T1.0 (2026-11-30 evening, 20 min)'
unset output
