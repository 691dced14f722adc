#include "dflow/ops/example_wire.h"

#include <cstring>

namespace dflow {
namespace example_wire {

DataType KindType(Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return DT_STRING;
    case Kind::kFloat:
      return DT_FLOAT;
    case Kind::kInt64:
      return DT_INT64;
    case Kind::kNone:
      break;
  }
  return DT_INVALID;
}

bool WireReader::ReadVarint(uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*p_++);
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

bool WireReader::ReadTag(uint32_t* number, uint32_t* wire_type) {
  uint64_t tag;
  if (!ReadVarint(&tag) || tag > 0xffffffffu || (tag >> 3) == 0) return false;
  *number = static_cast<uint32_t>(tag >> 3);
  *wire_type = static_cast<uint32_t>(tag & 7);
  return true;
}

bool WireReader::ReadBytes(absl::string_view* v) {
  uint64_t len;
  if (!ReadVarint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
  *v = absl::string_view(p_, len);
  p_ += len;
  return true;
}

bool WireReader::Skip(uint32_t wire_type) {
  uint64_t unused;
  absl::string_view bytes;
  switch (wire_type) {
    case 0:
      return ReadVarint(&unused);
    case 1:
    case 5: {
      const int64_t n = wire_type == 1 ? 8 : 4;
      if (end_ - p_ < n) return false;
      p_ += n;
      return true;
    }
    case 2:
      return ReadBytes(&bytes);
    default:
      return false;  // Groups (3, 4) never occur in an Example; 6, 7 are invalid.
  }
}

namespace {

// The number of varints in a packed run; false when the run ends mid-varint.
bool CountVarints(absl::string_view packed, int64_t* n) {
  int64_t count = 0;
  for (char c : packed) count += (static_cast<uint8_t>(c) < 0x80);
  if (!packed.empty() && static_cast<uint8_t>(packed.back()) >= 0x80) return false;
  *n = count;
  return true;
}

// Validates one list message of `kind` and counts its values.
bool CountList(Kind kind, absl::string_view list, int64_t* n) {
  WireReader r(list);
  int64_t count = 0;
  uint32_t number, wire;
  while (!r.done()) {
    if (!r.ReadTag(&number, &wire)) return false;
    if (number != 1) {
      if (!r.Skip(wire)) return false;
      continue;
    }
    absl::string_view bytes;
    uint64_t v;
    if (kind == Kind::kBytes) {
      if (wire != 2 || !r.ReadBytes(&bytes)) return false;
      ++count;
    } else if (wire == 2) {  // packed
      if (!r.ReadBytes(&bytes)) return false;
      int64_t k;
      if (kind == Kind::kFloat) {
        if (bytes.size() % 4 != 0) return false;
        k = static_cast<int64_t>(bytes.size() / 4);
      } else if (!CountVarints(bytes, &k)) {
        return false;
      }
      count += k;
    } else if (kind == Kind::kFloat && wire == 5) {
      if (!r.Skip(5)) return false;
      ++count;
    } else if (kind == Kind::kInt64 && wire == 0) {
      if (!r.ReadVarint(&v)) return false;
      ++count;
    } else {
      return false;
    }
  }
  *n = count;
  return true;
}

// Calls fn(wire type, value bytes or varint) for every field 1 of a list.
template <typename Fn>
void ForEachValueField(absl::string_view list, Fn&& fn) {
  WireReader r(list);
  uint32_t number, wire;
  while (!r.done() && r.ReadTag(&number, &wire)) {
    absl::string_view bytes;
    uint64_t v = 0;
    const char* at = r.pos();
    if (number == 1 && wire == 2) {
      r.ReadBytes(&bytes);
    } else if (number == 1 && wire == 0) {
      r.ReadVarint(&v);
    } else {
      r.Skip(wire);
      bytes = absl::string_view(at, r.pos() - at);
    }
    if (number == 1) fn(wire, bytes, v);
  }
}

}  // namespace

bool ParseFeature(absl::string_view feature, FeatureList* list) {
  list->kind_ = Kind::kNone;
  list->size_ = 0;
  list->list_ = absl::string_view();
  WireReader r(feature);
  if (r.done()) return true;  // a Feature with no list
  uint32_t number, wire;
  if (!r.ReadTag(&number, &wire) || number < 1 || number > 3 || wire != 2 ||
      !r.ReadBytes(&list->list_)) {
    return false;
  }
  list->kind_ = static_cast<Kind>(number);
  return CountList(list->kind_, list->list_, &list->size_);
}

void FeatureList::CopyFloats(float* out) const {
  ForEachValueField(list_, [&](uint32_t wire, absl::string_view b, uint64_t) {
    std::memcpy(out, b.data(), b.size());  // a packed run, or one fixed32 value
    out += b.size() / 4;
  });
}

void FeatureList::CopyInt64s(int64_t* out) const {
  ForEachValueField(list_, [&](uint32_t wire, absl::string_view b, uint64_t v) {
    if (wire == 0) {
      *out++ = static_cast<int64_t>(v);
      return;
    }
    WireReader packed(b);
    uint64_t x;
    while (!packed.done() && packed.ReadVarint(&x)) *out++ = static_cast<int64_t>(x);
  });
}

void FeatureList::CopyBytes(std::string* out) const {
  ForEachValueField(
      list_, [&](uint32_t, absl::string_view b, uint64_t) { (out++)->assign(b.data(), b.size()); });
}

}  // namespace example_wire
}  // namespace dflow
