// Parsing ops that turn records into numbers:
//
//   DecodeRaw        the bytes of each string as a vector of out_type elements
//                    (what a pipeline reading raw TFRecords maps over its records)
//   DecodeCSV        CSV lines into one tensor per column (RFC 4180 quoting)
//   StringToNumber   each string as a number
//   SerializeTensor  a tensor as a serialized TensorProto, and ParseTensor back
//
// tf.train.Example parsing lives in example_parsing_ops.cc. OpDefs are
// TensorFlow's; the error texts follow TensorFlow's kernels, naming the record
// and the field where TensorFlow does.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// Output: input.shape + [n], n = each string's bytes / the element size;
// every string must have the same length, a multiple of the element size.
class DecodeRawOp : public OpKernel {
 public:
  explicit DecodeRawOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("out_type", &out_type_).IgnoreError();
    c->GetAttr("little_endian", &little_endian_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    auto in = ctx->input(0).flat<std::string>();
    const size_t width = DataTypeSize(out_type_);
    const size_t bytes = in.empty() ? 0 : in[0].size();
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].size() != bytes) {
        return ctx->InvalidArgument(
            "DecodeRaw requires input strings to all be the same size, but element ", i,
            " has size ", bytes, " != ", in[i].size());
      }
    }
    if (bytes % width != 0) {
      return ctx->InvalidArgument("Input to DecodeRaw has length ", bytes,
                                  " that is not a multiple of ", width, ", the size of ",
                                  DataTypeString(out_type_));
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < ctx->input(0).dims(); ++d) dims.push_back(ctx->input(0).dim_size(d));
    dims.push_back(static_cast<int64_t>(bytes / width));
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, out_type_, "DecodeRaw"));
    char* out = static_cast<char*>(ctx->allocate_output_for_overwrite(0, shape)->raw_data());
    for (size_t i = 0; i < in.size(); ++i) {
      std::memcpy(out + i * bytes, in[i].data(), bytes);
      if (!little_endian_) {  // dflow runs on little-endian hosts only
        for (size_t e = 0; e < bytes; e += width)
          std::reverse(out + i * bytes + e, out + i * bytes + e + width);
      }
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType out_type_ = DT_FLOAT;
  bool little_endian_ = true;
};

REGISTER_OP("DecodeRaw")
    .Input("bytes: string")
    .Output("output: out_type")
    .Attr("out_type: {float, double, int32, uint8, int64}")
    .Attr("little_endian: bool = true")
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("DecodeRaw").Device(kDeviceCPU), DecodeRawOp);
REGISTER_NO_GRADIENT("DecodeRaw");

// --- numbers from text -------------------------------------------------------

// Parses `text` as a T the way TensorFlow's string conversions do: surrounding
// whitespace allowed; integers decimal with an optional sign and no overflow;
// floats also in hex, "inf"/"infinity"/"nan" in any case, out of range
// becoming ±inf or 0.
template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  if constexpr (std::is_integral_v<T>) {
    return absl::SimpleAtoi(text, out);
  } else {
    text = absl::StripAsciiWhitespace(text);
    if (text.empty()) return false;
    std::string s(text);  // strtod needs a terminator
    char* end = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      *out = std::strtof(s.c_str(), &end);
    } else {
      *out = std::strtod(s.c_str(), &end);
    }
    return end == s.c_str() + s.size();
  }
}

// Calls fn.template operator()<T>() for the C++ type of a number dtype.
template <typename Fn>
absl::Status SwitchNumberType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DT_FLOAT:
      return fn(float{});
    case DT_DOUBLE:
      return fn(double{});
    case DT_INT32:
      return fn(int32_t{});
    case DT_INT64:
      return fn(int64_t{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported number type ", DataTypeString(dtype)));
  }
}

class StringToNumberOp : public OpKernel {
 public:
  explicit StringToNumberOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("out_type", &out_type_).IgnoreError();
    if (!IsSupportedDataType(out_type_)) {  // uint32, uint64: no dflow tensor holds them yet
      c->SetStatus(absl::UnimplementedError(
          absl::StrCat("[StringToNumber] out_type ", DataTypeString(out_type_),
                       " is not supported by dflow tensors (float, double, int32, int64 are)")));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, in.shape());
    return SwitchNumberType(out_type_, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      auto src = in.flat<std::string>();
      auto dst = out->flat<T>();
      for (size_t i = 0; i < src.size(); ++i) {
        if (!ParseNumber(src[i], &dst[i])) {
          return ctx->InvalidArgument("StringToNumberOp could not correctly convert string: ",
                                      src[i]);
        }
      }
      return absl::OkStatus();
    });
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType out_type_ = DT_FLOAT;
};

REGISTER_OP("StringToNumber")
    .Input("string_tensor: string")
    .Output("output: out_type")
    .Attr("out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("StringToNumber").Device(kDeviceCPU), StringToNumberOp);
REGISTER_NO_GRADIENT("StringToNumber");

// --- CSV ---------------------------------------------------------------------

// Splits one CSV record into fields (views into `record`, or into `scratch`
// for quoted fields with doubled quotes). Quoting follows RFC 4180 when
// `quotes` is set: a field starting with '"' runs to the next lone '"', which
// must end the record or precede the delimiter; unquoted fields may not hold
// quotes or line breaks. A record of n delimiters has n + 1 fields; "" has none.
class CsvSplitter {
 public:
  CsvSplitter(char delim, bool quotes) : delim_(delim), quotes_(quotes) {}

  // Fails with the reason, without the record's name (the caller adds it).
  absl::Status Split(absl::string_view record, std::vector<absl::string_view>* fields,
                     std::deque<std::string>* scratch) const {
    fields->clear();
    if (record.empty()) return absl::OkStatus();
    size_t i = 0;
    while (true) {
      if (quotes_ && i < record.size() && record[i] == '"') {
        RETURN_IF_ERROR(Quoted(record, &i, fields, scratch));
      } else {
        const size_t start = i;
        while (i < record.size() && record[i] != delim_) {
          if (quotes_ && (record[i] == '"' || record[i] == '\n' || record[i] == '\r')) {
            return absl::InvalidArgumentError("Unquoted fields cannot have quotes/CRLFs inside");
          }
          ++i;
        }
        fields->push_back(record.substr(start, i - start));
      }
      if (i >= record.size()) return absl::OkStatus();
      ++i;  // the delimiter; a trailing one leaves an empty last field
      if (i == record.size()) {
        fields->push_back(absl::string_view());
        return absl::OkStatus();
      }
    }
  }

 private:
  // REQUIRES: record[*i] == '"'. Leaves *i at the delimiter or the end.
  absl::Status Quoted(absl::string_view record, size_t* i, std::vector<absl::string_view>* fields,
                      std::deque<std::string>* scratch) const {
    const size_t start = ++*i;
    bool doubled = false;
    while (true) {
      if (*i >= record.size()) {
        return absl::InvalidArgumentError(
            "Quoted field has to end with quote followed by delim or end");
      }
      if (record[*i] != '"') {
        ++*i;
        continue;
      }
      if (*i + 1 < record.size() && record[*i + 1] == '"') {  // an escaped quote
        doubled = true;
        *i += 2;
        continue;
      }
      break;
    }
    absl::string_view body = record.substr(start, *i - start);
    ++*i;  // the closing quote
    if (*i < record.size() && record[*i] != delim_) {
      return absl::InvalidArgumentError("Quote inside a string has to be escaped by another quote");
    }
    if (!doubled) {
      fields->push_back(body);
      return absl::OkStatus();
    }
    std::string& s = scratch->emplace_back();
    for (size_t k = 0; k < body.size(); ++k) {
      s.push_back(body[k]);
      if (body[k] == '"') ++k;  // skip the second quote of a pair
    }
    fields->push_back(s);
    return absl::OkStatus();
  }

  char delim_;
  bool quotes_;
};

class DecodeCSVOp : public OpKernel {
 public:
  explicit DecodeCSVOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string delim;
    c->GetAttr("OUT_TYPE", &out_types_).IgnoreError();
    c->GetAttr("field_delim", &delim).IgnoreError();
    c->GetAttr("use_quote_delim", &use_quote_delim_).IgnoreError();
    c->GetAttr("na_value", &na_value_).IgnoreError();
    c->GetAttr("select_cols", &select_cols_).IgnoreError();
    if (delim.size() != 1) {
      c->SetStatus(absl::InvalidArgumentError("[DecodeCSV] field_delim should be only 1 char"));
      return;
    }
    delim_ = delim[0];
    if (!select_cols_.empty() && select_cols_.size() != out_types_.size()) {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat(
          "[DecodeCSV] select_cols should match record_defaults: ", select_cols_.size(), " vs ",
          out_types_.size())));
      return;
    }
    for (size_t i = 0; i < select_cols_.size(); ++i) {
      if (select_cols_[i] < 0 || (i > 0 && select_cols_[i] <= select_cols_[i - 1])) {
        c->SetStatus(absl::InvalidArgumentError(
            "[DecodeCSV] select_cols should be non-negative and strictly increasing"));
        return;
      }
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const int num_cols = static_cast<int>(out_types_.size());
    for (int c = 0; c < num_cols; ++c) {
      if (ctx->input(1 + c).NumElements() > 1) {
        return ctx->InvalidArgument("There should only be 1 default per field but field ", c,
                                    " has ", ctx->input(1 + c).NumElements());
      }
    }
    const Tensor& records = ctx->input(0);
    auto lines = records.flat<std::string>();
    std::vector<Tensor*> outs(num_cols);
    for (int c = 0; c < num_cols; ++c) outs[c] = ctx->allocate_output(c, records.shape());
    CsvSplitter splitter(delim_, use_quote_delim_);
    std::vector<absl::string_view> fields;
    std::deque<std::string> scratch;
    for (size_t r = 0; r < lines.size(); ++r) {
      scratch.clear();
      absl::Status s = splitter.Split(lines[r], &fields, &scratch);
      if (!s.ok()) return ctx->InvalidArgument(s.message(), " in record ", r);
      if (select_cols_.empty() && fields.size() != static_cast<size_t>(num_cols)) {
        return ctx->InvalidArgument("Expect ", num_cols, " fields but have ", fields.size(),
                                    " in record ", r);
      }
      if (!select_cols_.empty() && fields.size() <= static_cast<size_t>(select_cols_.back())) {
        const int have =
            static_cast<int>(std::upper_bound(select_cols_.begin(), select_cols_.end(),
                                              static_cast<int64_t>(fields.size()) - 1) -
                             select_cols_.begin());
        return ctx->InvalidArgument("Expect ", num_cols, " fields but have ", have, " in record ",
                                    r);
      }
      for (int c = 0; c < num_cols; ++c) {
        const int64_t col = select_cols_.empty() ? c : select_cols_[c];
        RETURN_IF_ERROR(SetField(ctx, r, c, fields[col], outs[c]));
      }
    }
    return absl::OkStatus();
  }

 private:
  // Writes column `c` of record `r`: the default where the field is empty or
  // na_value, else the field parsed as the column's type.
  absl::Status SetField(OpKernelContext* ctx, size_t r, int c, absl::string_view field,
                        Tensor* out) const {
    const Tensor& def = ctx->input(1 + c);
    if (field.empty() || field == na_value_) {
      if (def.NumElements() == 0) {
        return ctx->InvalidArgument("Field ", c, " is required but missing in record ", r, "!");
      }
      CopyDefault(def, out, r);
      return absl::OkStatus();
    }
    if (out_types_[c] == DT_STRING) {
      out->flat<std::string>()[r].assign(field.data(), field.size());
      return absl::OkStatus();
    }
    return SwitchNumberType(out_types_[c], [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      if (!ParseNumber(field, &out->flat<T>()[r])) {
        return ctx->InvalidArgument("Field ", c, " in record ", r, " is not a valid ",
                                    DataTypeString(out_types_[c]), ": ", field);
      }
      return absl::OkStatus();
    });
  }

  static void CopyDefault(const Tensor& def, Tensor* out, size_t r) {
    if (def.dtype() == DT_STRING) {
      out->flat<std::string>()[r] = def.flat<std::string>()[0];
      return;
    }
    const size_t w = DataTypeSize(def.dtype());
    std::memcpy(static_cast<char*>(out->raw_data()) + r * w, def.raw_data(), w);
  }

  std::vector<DataType> out_types_;
  char delim_ = ',';
  bool use_quote_delim_ = true;
  std::string na_value_;
  std::vector<int64_t> select_cols_;
};

// Every output has the records' shape; each default is a scalar or empty vector.
absl::Status DecodeCSVShape(InferenceContext* c) {
  for (int i = 1; i < c->num_inputs(); ++i) {
    const PartialShape& d = c->input(i);
    if (d.rank_known() && d.rank() > 1) {
      return c->Error(absl::StrCat("record_defaults[", i - 1, "] must be a scalar or vector, got ",
                                   d.DebugString()));
    }
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(0));
  return absl::OkStatus();
}

REGISTER_OP("DecodeCSV")
    .Input("records: string")
    .Input("record_defaults: OUT_TYPE")
    .Output("output: OUT_TYPE")
    .Attr("OUT_TYPE: list({float,double,int32,int64,string})")
    .Attr("field_delim: string = ','")
    .Attr("use_quote_delim: bool = true")
    .Attr("na_value: string = ''")
    .Attr("select_cols: list(int) = []")
    .SetShapeFn(DecodeCSVShape);
REGISTER_KERNEL(KernelDefBuilder("DecodeCSV").Device(kDeviceCPU), DecodeCSVOp);
REGISTER_NO_GRADIENT("DecodeCSV");

// --- tensors as TensorProto bytes --------------------------------------------

class SerializeTensorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    tensorflow::TensorProto proto;
    ctx->input(0).AsProtoTensorContent(&proto);
    Tensor out(DT_STRING, TensorShape());
    if (!proto.SerializeToString(&out.scalar<std::string>())) {
      return ctx->InvalidArgument("could not serialize a ", ctx->input(0).DebugString(0));
    }
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

class ParseTensorOp : public OpKernel {
 public:
  explicit ParseTensorOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("out_type", &out_type_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    if (in.dims() != 0) {
      return ctx->InvalidArgument("Expected `serialized` to be a scalar, got shape: ",
                                  in.shape().DebugString());
    }
    const std::string& bytes = in.scalar<std::string>();
    tensorflow::TensorProto proto;
    if (!proto.ParseFromString(bytes)) {
      return ctx->InvalidArgument("Could not parse `serialized` as TensorProto, base64: ",
                                  absl::WebSafeBase64Escape(bytes));
    }
    absl::StatusOr<Tensor> t = Tensor::FromProto(proto);
    if (!t.ok()) {
      return absl::Status(
          t.status().code(),
          absl::StrCat(ctx->Prefix(), "Could not parse `serialized`: ", t.status().message()));
    }
    if (t->dtype() != out_type_) {
      return ctx->InvalidArgument("Type mismatch between parsed tensor (",
                                  DataTypeString(t->dtype()), ") and dtype (",
                                  DataTypeString(out_type_), ")");
    }
    ctx->set_output(0, *std::move(t));
    return absl::OkStatus();
  }

 private:
  DataType out_type_ = DT_FLOAT;
};

REGISTER_OP("SerializeTensor")
    .Input("tensor: T")
    .Output("serialized: string")
    .Attr("T: type")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("SerializeTensor").Device(kDeviceCPU), SerializeTensorOp);
REGISTER_NO_GRADIENT("SerializeTensor");

REGISTER_OP("ParseTensor")
    .Input("serialized: string")
    .Output("output: out_type")
    .Attr("out_type: type")
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("ParseTensor").Device(kDeviceCPU), ParseTensorOp);
REGISTER_NO_GRADIENT("ParseTensor");

}  // namespace
}  // namespace dflow
