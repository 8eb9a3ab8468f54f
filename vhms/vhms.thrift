/*
 * The VHMS service: ingest columns of samples, fetch buckets, list series and labels.
 * Transport: framed; protocol: binary. Numbers travel as little-endian binary columns.
 *
 * Ingest protocol versions: 1 sent a canonical key string per sample (ingest); 2 (this
 * one) sends the batch's symbol table (ingest_columns): names and label sets once, a
 * series reference per sample. A VHMS of protocol 2 answers a protocol-1 ingest with a
 * VhmsException of kind "ProtocolVersionError" naming both versions.
 */
namespace py vhms_service

const i32 INGEST_PROTOCOL_VERSION = 2

exception VhmsException {
  1: string kind,      // SelectorError, FetchLimitError, ValueError...
  2: string message,
}

struct IngestReply {
  1: i64 stored,       // samples stored in at least one ring
  2: i64 refused,      // samples refused (too old, series limit, clock)
}

struct IngestBatch {
  1: i32 protocol_version,        // INGEST_PROTOCOL_VERSION of the sender
  2: list<string> names,          // the series' names, each once
  3: list<string> label_sets,     // canonical label texts k1=v1,k2=v2 (common labels merged), each once
  4: binary name_ids,             // int32 LE per numeric sample: its name in names
  5: binary set_ids,              // int32 LE per numeric sample: its label set in label_sets
  6: binary values,               // float64 LE per numeric sample
  7: binary timestamps,           // int64 LE per numeric sample, epoch ms
  8: binary string_name_ids,      // int32 LE per STRING sample
  9: binary string_set_ids,       // int32 LE per STRING sample
  10: list<string> strings,       // the text of each STRING sample
  11: binary string_timestamps,   // int64 LE per STRING sample, epoch ms
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
                                   // (asked with sample_times: from the finest ring, else the bucket's start)
  7: optional binary coarse_spans, // int64 LE (step_ms, start_ms, end_ms) triples: the buckets a
                                   // stitched sample read took from coarser rings (vhms.CoarseSpan)
}

struct StringsReply {
  1: list<string> keys,       // the STRING series, canonical name{labels}
  2: list<string> values,     // the last value of each
  3: binary timestamps,       // int64 LE: when each was sampled, epoch ms
}

struct CatchUpChunk {
  1: binary data,             // the series [first_series, next_series) in the snapshot's .npz layout
  2: i64 next_series,         // where the next chunk starts
  3: i64 total_series,        // the peer's series when the chunk was read
}

service Vhms {
  IngestReply ingest_columns(1: IngestBatch batch) throws (1: VhmsException error),
  // protocol 1, kept only to refuse it by name (ProtocolVersionError)
  IngestReply ingest(1: list<string> keys, 2: binary values, 3: binary timestamps,
                     4: list<string> string_keys, 5: list<string> strings, 6: binary string_timestamps)
    throws (1: VhmsException error),
  FetchReply fetch(1: string selector, 2: i64 start_ms, 3: i64 end_ms, 4: string resolution,
                   5: bool sample_times)
    throws (1: VhmsException error),
  list<string> series(1: string selector) throws (1: VhmsException error),
  list<string> label_names() throws (1: VhmsException error),
  list<string> label_values(1: string label) throws (1: VhmsException error),
  StringsReply strings(1: string selector) throws (1: VhmsException error),
  // a replica catching up reads its peer's store chunk by chunk (vhms.server.catchup);
  // the peer caps max_bytes at its own limit
  CatchUpChunk catch_up_chunk(1: i64 first_series, 2: i64 max_bytes) throws (1: VhmsException error),
}
