# gnuplot time_vs_operators.gp (from the results dir) redraws the plot.
set logscale xy
set grid xtics ytics mxtics mytics lc rgb '#dddddd'
set xlabel 'operators in the training graph'
set ylabel 'planning time (s)'
set title 'roamc planning time against graph size'
set key outside right top box
set terminal pngcairo size 1000,600 font 'sans,11'
set output 'time_vs_operators.png'
plot 'time_vs_operators.dat' index 0 using 1:2 with points pt 1 ps 1.5 title 'PyTorch', 'time_vs_operators.dat' index 1 using 1:2 with points pt 2 ps 1.5 title 'Heuristics', 'time_vs_operators.dat' index 2 using 1:2 with points pt 3 ps 1.5 title 'ILP', 'time_vs_operators.dat' index 3 using 1:2 with points pt 4 ps 1.5 title 'ROAM'
set terminal svg size 1000,600 font 'sans,11' enhanced
set output 'time_vs_operators.svg'
replot
unset output
