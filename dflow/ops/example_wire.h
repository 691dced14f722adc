// Reads serialized tensorflow.Example protos straight from their wire bytes,
// without building message objects: the parsing ops look up the features they
// were asked for and decode each feature's values directly into the output
// tensors, so a feature costs no allocation and no intermediate copy.
//
// The messages (package tensorflow, field numbers as TensorFlow's
// example.proto and feature.proto define them):
//   Example   { Features features = 1; }
//   Features  { map<string, Feature> feature = 1; }   entry: key = 1, value = 2
//   Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                            Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }
//   FloatList { repeated float value = 1 [packed]; }  (unpacked also accepted)
//   Int64List { repeated int64 value = 1 [packed]; }  (unpacked also accepted)
// As in TensorFlow's parser: a later map entry with the same key replaces an
// earlier one, and a Feature's first field is its list (later fields are
// ignored; protobuf would merge them, TensorFlow does not).
//
//   bool ok = ForEachFeature(example, [&](absl::string_view key, absl::string_view f) {...});
//   FeatureList list;
//   ok = ParseFeature(f, &list);
//   int64_t n = list.size();  list.CopyFloats(out);
#ifndef DFLOW_OPS_EXAMPLE_WIRE_H_
#define DFLOW_OPS_EXAMPLE_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "dflow/framework/types.h"

namespace dflow {
namespace example_wire {

// The oneof member of a Feature; kNone for a Feature with no list set.
enum class Kind { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

// DT_STRING, DT_FLOAT or DT_INT64 for a kind (DT_INVALID for kNone).
DataType KindType(Kind kind);

// Reads the protobuf wire format: varints, tags and length-delimited fields.
class WireReader {
 public:
  explicit WireReader(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }
  const char* pos() const { return p_; }
  bool ReadVarint(uint64_t* v);
  // A field's tag: number and wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
  bool ReadTag(uint32_t* number, uint32_t* wire_type);
  bool ReadBytes(absl::string_view* v);
  // Skips a field's value of `wire_type` (groups are refused).
  bool Skip(uint32_t wire_type);

 private:
  const char* p_;
  const char* end_;
};

// Calls fn(key, feature bytes) for every map entry of the Example's features,
// in wire order (so a caller keeping the last one per key gets protobuf's
// result). False when the bytes are not a well-formed Example.
template <typename Fn>
bool ForEachFeature(absl::string_view example, Fn&& fn) {
  WireReader ex(example);
  uint32_t number, wire;
  while (!ex.done()) {
    if (!ex.ReadTag(&number, &wire)) return false;
    if (number != 1 || wire != 2) {
      if (!ex.Skip(wire)) return false;
      continue;
    }
    absl::string_view features;
    if (!ex.ReadBytes(&features)) return false;
    WireReader fs(features);
    while (!fs.done()) {
      if (!fs.ReadTag(&number, &wire)) return false;
      if (number != 1 || wire != 2) {
        if (!fs.Skip(wire)) return false;
        continue;
      }
      absl::string_view entry, key, value;
      if (!fs.ReadBytes(&entry)) return false;
      WireReader en(entry);
      while (!en.done()) {
        if (!en.ReadTag(&number, &wire)) return false;
        if ((number == 1 || number == 2) && wire == 2) {
          if (!en.ReadBytes(number == 1 ? &key : &value)) return false;
        } else if (!en.Skip(wire)) {
          return false;
        }
      }
      fn(key, value);
    }
  }
  return true;
}

// One feature's values, still in wire form: its list message's bytes, a view
// into the serialized example.
class FeatureList {
 public:
  Kind kind() const { return kind_; }
  // The number of values; computed by ParseFeature.
  int64_t size() const { return size_; }
  // REQUIRES: kind() is the matching kind, `out` has size() elements.
  void CopyFloats(float* out) const;
  void CopyInt64s(int64_t* out) const;
  void CopyBytes(std::string* out) const;

 private:
  friend bool ParseFeature(absl::string_view feature, FeatureList* list);
  Kind kind_ = Kind::kNone;
  int64_t size_ = 0;
  absl::string_view list_;  // the list message (BytesList, FloatList or Int64List)
};

// Parses a Feature's bytes: its kind (kNone for an empty Feature) and its
// value count, validating the list. False when the bytes are malformed.
bool ParseFeature(absl::string_view feature, FeatureList* list);

}  // namespace example_wire
}  // namespace dflow

#endif  // DFLOW_OPS_EXAMPLE_WIRE_H_
