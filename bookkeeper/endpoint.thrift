/*
 * The bookkeeper endpoint: what an application serves and an agent polls.
 *
 * Transport: framed (4-byte big-endian length, then the message), binary protocol.
 * A batch is columnar: one row per variable, label sets and names sent once each and
 * referenced by id, numbers packed little-endian in binary columns (see docs/bookkeeper.md).
 */
namespace py bookkeeper_endpoint
namespace java artimon.bookkeeper

enum VarType {
  INTEGER = 0,
  DOUBLE = 1,
  BOOLEAN = 2,
  STRING = 3,
}

struct VarBatch {
  1: required i32 protocol_version,
  2: required string context,
  3: required i64 snapshot_ms,                 // when the snapshot was taken, epoch ms
  4: required map<string, string> common_labels, // framework labels of every variable
  5: required list<string> names,              // distinct variable names
  6: required list<string> label_sets,         // distinct canonical label sets "k=v,k2=v2"
  7: required binary name_ids,                 // int32 LE per variable: index into names
  8: required binary label_set_ids,            // int32 LE per variable: index into label_sets
  9: required binary types,                    // uint8 per variable: a VarType
  10: required binary values,                  // 8 bytes LE per variable: int64 for INTEGER and
                                               // BOOLEAN (0/1), float64 for DOUBLE, int64 index
                                               // into strings for STRING
  11: required binary timestamps,              // int64 LE per variable: last update, epoch ms
  12: required list<string> strings,           // values of the STRING variables
}

service BookkeeperEndpoint {
  /* The protocol version this endpoint speaks. */
  i32 ping(),
  /* Every variable of the context, as one columnar batch. */
  VarBatch snapshot(),
}
