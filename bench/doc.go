// Package bench is the engine of iggy-bench, the load generator users run against a
// running iggy-shard (or any Apache Iggy 0.11.0 server): the benchmark kinds of
// Apache Iggy's own iggy-bench, over TCP, through package client.
//
//	kind   actors                                 streams × partitions      measures
//	pp     P producers, one stream each           P × 1                     send latency, throughput
//	pc     C consumers, one stream each (seeded)  C × 1                     poll latency, throughput
//	ppc    P producers and C consumers at once    P × 1                     both, and producer→consumer latency
//	bp     P producers, balanced by the server    1 × 24                    send latency, throughput
//	bcg    C consumers in G groups (seeded)       G × 24, a group each      poll latency, throughput
//	bpcg   P producers and G groups at once       G × 24                    both, and producer→consumer latency
//	e2e    P actors: send a batch, poll it back   P × 1                     round trip through the server
//	e2ecg  max(P, C) actors, each sending and     G × 24                    both, on shared connections
//	       polling as a group member
//
// Every actor has its own client.Client connection and goroutine. A producer builds
// its batch once (templateBatch) and before each send only rewrites the origin
// timestamp and the batch checksum, which covers the frame checksums and not the
// payloads, so the send loop allocates nothing and hashes 8 bytes per message.
// Consumers decode polls in place. Each actor records one latency per batch into its
// own Histogram; the run merges them into per-role totals, with throughput computed
// over the window from the first measured batch to the last, not summed per actor.
//
// Consumers verify what they poll: every frame checksum (wire.PolledMessages.Verify),
// each message's id (the producer's mark and the message's index in its batch, which
// must equal its offset modulo the batch size), its payload size, offsets contiguous
// within a poll and, per partition and reader, contiguous across polls from 0 up to
// exactly the count the server confirmed to the producers. So a run also catches a
// lost, duplicated, reordered or corrupted message.
//
// The tool owns the streams named bench-stream-N (topic bench-topic, group
// bench-group): it deletes old ones of the same names before a run, so that readers
// start at offset 0, and deletes its own afterwards unless Config.KeepStreams.
//
// Each actor also keeps a series of its figures second by second (secondSeries: the
// open second in a full histogram, closed seconds compacted to their non-empty
// buckets), which the report merges per role into Report.Series; a Watcher hears
// of the run's steps and, every ProgressInterval, of its progress.
//
// RawLoopback is a baseline: the same frames written over plain loopback TCP
// connections to a reader that discards them; MeasureBaseline adds sequential
// writes of the same frames to a file (page cache, and an fdatasync every MiB) and
// Report.Compare the ratios of the run to them.
//
// A report is written as a table, as JSON, or into a directory (WriteReportDir):
//
//	summary.json    the Report: setup, totals and per-actor figures with p50, p90,
//	                p95, p99, p99.9, p99.99, max, the baseline, the series and
//	                the merged latency histograms
//	timeseries.csv  second,role,messages,batches,messages_per_second,
//	                payload_mb_per_second,p50_ms,p99_ms,max_ms
//	report.html     one self-contained page: tables and four SVG charts
//
// The end-to-end suites of `go test -bench EndToEnd` are in e2e_bench_test.go.
package bench
