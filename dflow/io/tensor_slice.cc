#include "dflow/io/tensor_slice.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dflow/framework/status.h"

namespace dflow::io {

TensorSlice TensorSlice::Full(int dims) {
  TensorSlice s;
  s.starts_.assign(dims, 0);
  s.lengths_.assign(dims, kFullExtent);
  return s;
}

absl::StatusOr<TensorSlice> TensorSlice::Parse(absl::string_view spec) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("[TensorSlice] bad slice '", spec, "': ", why));
  };
  TensorSlice s;
  if (spec.empty()) return s;
  for (absl::string_view extent : absl::StrSplit(spec, ':')) {
    if (extent == "-") {
      s.starts_.push_back(0);
      s.lengths_.push_back(kFullExtent);
      continue;
    }
    std::vector<absl::string_view> parts = absl::StrSplit(extent, ',');
    int64_t start = 0, length = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &start) ||
        !absl::SimpleAtoi(parts[1], &length)) {
      return bad(absl::StrCat("extent '", extent, "' is neither '-' nor 'start,length'"));
    }
    if (start < 0 || length < 0) return bad("starts and lengths must be >= 0");
    s.starts_.push_back(start);
    s.lengths_.push_back(length);
  }
  return s;
}

absl::StatusOr<TensorSlice> TensorSlice::FromProto(const tensorflow::TensorSliceProto& proto) {
  TensorSlice s;
  for (const auto& e : proto.extent()) {
    const bool full = e.has_length_case() == tensorflow::TensorSliceProto::Extent::HAS_LENGTH_NOT_SET;
    if (e.start() < 0 || (!full && e.length() < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("[TensorSlice] negative extent in ", proto.ShortDebugString()));
    }
    s.starts_.push_back(full ? 0 : e.start());
    s.lengths_.push_back(full ? kFullExtent : e.length());
  }
  return s;
}

void TensorSlice::AsProto(tensorflow::TensorSliceProto* proto) const {
  proto->Clear();
  for (int d = 0; d < dims(); ++d) {
    auto* e = proto->add_extent();
    if (!IsFullAt(d)) {
      e->set_start(starts_[d]);
      e->set_length(lengths_[d]);
    }
  }
}

bool TensorSlice::Covers(const TensorShape& full) const {
  if (dims() != full.dims()) return false;
  for (int d = 0; d < dims(); ++d) {
    if (!IsFullAt(d) && (starts_[d] != 0 || lengths_[d] != full.dim_size(d))) return false;
  }
  return true;
}

absl::StatusOr<TensorShape> TensorSlice::SliceShape(const TensorShape& full) const {
  if (dims() != full.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("[TensorSlice] slice '", DebugString(),
                                                   "' has rank ", dims(), " but the tensor ",
                                                   full.DebugString(), " has ", full.dims()));
  }
  std::vector<int64_t> dims_out;
  for (int d = 0; d < dims(); ++d) {
    if (IsFullAt(d)) {
      dims_out.push_back(full.dim_size(d));
    } else if (starts_[d] > full.dim_size(d) || lengths_[d] > full.dim_size(d) - starts_[d]) {
      return absl::InvalidArgumentError(absl::StrCat("[TensorSlice] slice '", DebugString(),
                                                     "' leaves the tensor ",
                                                     full.DebugString(), " in dimension ", d));
    } else {
      dims_out.push_back(lengths_[d]);
    }
  }
  return TensorShape(dims_out);
}

TensorSlice TensorSlice::Explicit(const TensorShape& full) const {
  TensorSlice s = *this;
  for (int d = 0; d < dims(); ++d) {
    if (IsFullAt(d)) s.lengths_[d] = full.dim_size(d);
  }
  return s;
}

std::optional<TensorSlice> TensorSlice::Intersect(const TensorSlice& other) const {
  TensorSlice s;
  for (int d = 0; d < dims(); ++d) {
    const int64_t lo = std::max(starts_[d], other.starts_[d]);
    const int64_t hi =
        std::min(starts_[d] + lengths_[d], other.starts_[d] + other.lengths_[d]);
    if (hi <= lo) return std::nullopt;
    s.starts_.push_back(lo);
    s.lengths_.push_back(hi - lo);
  }
  return s;
}

std::string TensorSlice::DebugString() const {
  std::vector<std::string> parts;
  for (int d = 0; d < dims(); ++d) {
    parts.push_back(IsFullAt(d) ? "-" : absl::StrCat(starts_[d], ",", lengths_[d]));
  }
  return absl::StrJoin(parts, ":");
}

absl::StatusOr<std::optional<ShapeAndSlice>> ParseShapeAndSlice(absl::string_view text) {
  if (text.empty()) return std::optional<ShapeAndSlice>();
  std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("[ShapeAndSlice] bad shape_and_slice '", text, "': ", why));
  };
  if (parts.size() < 2) return bad("expected the dims of the full tensor, then a slice");
  std::vector<int64_t> dims;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(parts[i], &d) || d < 0) return bad(absl::StrCat("dim '", parts[i], "'"));
    dims.push_back(d);
  }
  ASSIGN_OR_RETURN(TensorShape full, TensorShape::FromDims(dims));
  ASSIGN_OR_RETURN(TensorSlice slice, TensorSlice::Parse(parts.back()));
  if (slice.dims() != full.dims()) {
    return bad(absl::StrCat("the slice has rank ", slice.dims(), ", the shape ", full.dims()));
  }
  RETURN_IF_ERROR(slice.SliceShape(full).status());
  return std::optional<ShapeAndSlice>(ShapeAndSlice{full, slice});
}

// --- ordered code (TensorFlow's strings::OrderedCode, increasing order) ------------------

namespace {

void WriteNumIncreasing(std::string* dst, uint64_t v) {
  char buf[9];
  int len = 0;
  for (; v > 0; v >>= 8) buf[8 - len++] = static_cast<char>(v & 0xff);
  dst->push_back(static_cast<char>(len));
  dst->append(buf + 9 - len, len);
}

// Escapes 0x00 as 00 ff and 0xff as ff 00, then ends with 00 01.
void WriteString(std::string* dst, absl::string_view s) {
  for (char c : s) {
    if (c == '\0') {
      dst->append("\0\xff", 2);
    } else if (c == '\xff') {
      dst->append("\xff\0", 2);
    } else {
      dst->push_back(c);
    }
  }
  dst->append("\0\x01", 2);
}

// The sign bit, then as many length bits as bytes follow the first, then a
// delimiter bit, then the value in big-endian two's complement.
void WriteSignedNumIncreasing(std::string* dst, int64_t v) {
  const uint64_t x = v < 0 ? ~static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (x < 64) {
    dst->push_back(static_cast<char>(0x80 ^ static_cast<uint8_t>(v)));
    return;
  }
  const int bits = 64 - __builtin_clzll(x) + 1;  // Value bits plus the sign.
  const int len = std::min(10, (bits + 6) / 7);   // n bytes hold 7n - 1 value bits.
  char buf[10];
  const char sign = v < 0 ? '\xff' : '\0';
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i) buf[2 + i] = static_cast<char>(static_cast<uint64_t>(v) >> (56 - 8 * i));
  static constexpr uint8_t kHeader[11][2] = {{0, 0},       {0x80, 0}, {0xc0, 0}, {0xe0, 0},
                                             {0xf0, 0},    {0xf8, 0}, {0xfc, 0}, {0xfe, 0},
                                             {0xff, 0},    {0xff, 0x80}, {0xff, 0xc0}};
  char* begin = buf + 10 - len;
  begin[0] ^= static_cast<char>(kHeader[len][0]);
  begin[1] ^= static_cast<char>(kHeader[len][1]);
  dst->append(begin, len);
}

}  // namespace

std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice) {
  std::string key;
  WriteNumIncreasing(&key, 0);
  WriteString(&key, name);
  WriteNumIncreasing(&key, static_cast<uint64_t>(slice.dims()));
  for (int d = 0; d < slice.dims(); ++d) {
    WriteSignedNumIncreasing(&key, slice.start(d));
    WriteSignedNumIncreasing(&key, slice.length(d));
  }
  return key;
}

// --- copying overlaps ---------------------------------------------------------------------

namespace {

// Copies `count` elements: raw bytes for fixed-size dtypes, assignment for strings.
void CopyElements(const Tensor& src, int64_t from, Tensor* dst, int64_t to, int64_t count) {
  if (src.dtype() == DT_STRING) {
    auto s = src.flat<std::string>();
    auto d = dst->flat<std::string>();
    std::copy_n(s.begin() + from, count, d.begin() + to);
    return;
  }
  const size_t bytes = DataTypeSize(src.dtype());
  std::memcpy(static_cast<char*>(dst->raw_data()) + to * bytes,
              static_cast<const char*>(src.raw_data()) + from * bytes, count * bytes);
}

std::vector<int64_t> RowMajorStrides(const TensorSlice& s) {
  std::vector<int64_t> strides(s.dims(), 1);
  for (int d = s.dims() - 2; d >= 0; --d) strides[d] = strides[d + 1] * s.length(d + 1);
  return strides;
}

}  // namespace

void CopySliceOverlap(const Tensor& src, const TensorSlice& src_slice, Tensor* dst,
                      const TensorSlice& dst_slice) {
  const std::optional<TensorSlice> overlap = src_slice.Intersect(dst_slice);
  if (!overlap) return;
  const int rank = overlap->dims();
  if (rank == 0) {
    CopyElements(src, 0, dst, 0, 1);
    return;
  }
  const std::vector<int64_t> src_strides = RowMajorStrides(src_slice);
  const std::vector<int64_t> dst_strides = RowMajorStrides(dst_slice);
  // Walk every index of the overlap but the last dimension; copy a run each.
  std::vector<int64_t> index(rank, 0);
  const int64_t run = overlap->length(rank - 1);
  while (true) {
    int64_t from = 0, to = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t global = overlap->start(d) + index[d];
      from += (global - src_slice.start(d)) * src_strides[d];
      to += (global - dst_slice.start(d)) * dst_strides[d];
    }
    CopyElements(src, from, dst, to, run);
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++index[d] < overlap->length(d)) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace dflow::io
