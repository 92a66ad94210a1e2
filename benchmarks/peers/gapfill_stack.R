# The R package gapfill (Gerber et al. 2018, IEEE TGRS) on its own mask study, for
# stack_peers.py: predicts the cells it is given and writes them out. Run by stack_peers.py;
# gapfill is installed by setup_stack_peers.sh into benchmarks/peers/.rlib, never with geogp.
#
#   Rscript gapfill_stack.R LIB maskstudy.rda PERCENT cells.txt out.csv
#
# cells.txt: 1-based linear indices into R's (x, y, doy, year) arrays, one per line.
# out.csv: index, fill (gapfill's prediction), truth (data_array at that index, so the caller
# checks that both sides read the same cells), and the wall time of Gapfill() in the header.
args <- commandArgs(trailingOnly = TRUE)
stopifnot(length(args) == 5L)
suppressPackageStartupMessages(library("gapfill", lib.loc = args[1]))
load(args[2])
masked <- get(paste0("data_array_masked", args[3]))
idx <- as.integer(readLines(args[4]))
stopifnot(all(is.na(masked[idx])), all(!is.na(data_array[idx])))
t0 <- Sys.time()
# the package's defaults (Subset, Predict, iMax = Inf), values clipped to NDVI's range as in
# the package's own mask-study tests
out <- Gapfill(data = masked, subset = idx, clipRange = c(0, 1), dopar = FALSE,
               verbose = FALSE)
secs <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
con <- file(args[5], "w")
writeLines(sprintf("# seconds %.2f", secs), con)
write.csv(data.frame(index = idx, fill = out$fill[idx], truth = data_array[idx]), con,
          row.names = FALSE)
close(con)
