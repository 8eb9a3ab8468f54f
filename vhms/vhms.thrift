/*
 * The VHMS service: ingest columns of samples, fetch buckets, list series and labels.
 * Transport: framed; protocol: binary. Numbers travel as little-endian binary columns.
 */
namespace py vhms_service

exception VhmsException {
  1: string kind,      // SelectorError, FetchLimitError, ValueError...
  2: string message,
}

struct IngestReply {
  1: i64 stored,       // samples stored in at least one ring
  2: i64 refused,      // samples refused (too old, series limit, clock)
}

struct LabelColumn {
  1: string label,            // "__name__" for the series' names
  2: list<string> values,     // the label's values, by code
  3: binary codes,            // int32 LE: a code per series, -1 where the series lacks the label
}

struct FetchReply {
  2: binary timestamps,       // int64 LE: bucket start times, epoch ms
  3: binary values,           // float64 LE: [series][buckets], row-major, NaN for gaps
  4: i64 step_ms,
  5: list<LabelColumn> labels, // the series' names and labels by columns
  6: optional binary sample_times, // int64 LE [series][buckets]: each value's own time, epoch ms
                                   // (asked with sample_times, from the finest ring only)
}

struct StringsReply {
  1: list<string> keys,       // the STRING series, canonical name{labels}
  2: list<string> values,     // the last value of each
  3: binary timestamps,       // int64 LE: when each was sampled, epoch ms
}

service Vhms {
  IngestReply ingest(1: list<string> keys, 2: binary values, 3: binary timestamps,
                     4: list<string> string_keys, 5: list<string> strings, 6: binary string_timestamps)
    throws (1: VhmsException error),
  FetchReply fetch(1: string selector, 2: i64 start_ms, 3: i64 end_ms, 4: string resolution,
                   5: bool sample_times)
    throws (1: VhmsException error),
  list<string> series(1: string selector) throws (1: VhmsException error),
  list<string> label_names(),
  list<string> label_values(1: string label),
  StringsReply strings(1: string selector) throws (1: VhmsException error),
}
