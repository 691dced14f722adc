#include "dflow/runtime/layout_rewrite.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/tensor.h"

namespace dflow {
namespace {

// Which inputs of an op are NCHW images and which a shape vector in NCHW
// order, and whether its output is an NCHW image (a filter gradient is HWIO).
struct LayoutSpec {
  std::vector<int> images;
  int shape_vector = -1;
  bool image_output = true;
};

const LayoutSpec* SpecOf(const std::string& op) {
  static const auto* conv2d = new LayoutSpec{{0}, -1, true};
  static const auto* backprop_input = new LayoutSpec{{2}, 0, true};
  static const auto* backprop_filter = new LayoutSpec{{0, 2}, -1, false};
  static const auto* pool = new LayoutSpec{{0}, -1, true};
  static const auto* max_pool_grad = new LayoutSpec{{0, 1, 2}, -1, true};
  static const auto* avg_pool_grad = new LayoutSpec{{1}, 0, true};
  if (op == "Conv2D") return conv2d;
  if (op == "Conv2DBackpropInput") return backprop_input;
  if (op == "Conv2DBackpropFilter") return backprop_filter;
  if (op == "MaxPool" || op == "AvgPool") return pool;
  if (op == "MaxPoolGrad") return max_pool_grad;
  if (op == "AvgPoolGrad") return avg_pool_grad;
  return nullptr;
}

bool IsNchwNode(const tensorflow::NodeDef& n) {
  if (SpecOf(n.op()) == nullptr) return false;
  auto it = n.attr().find("data_format");
  return it != n.attr().end() && it->second.s() == "NCHW";
}

// The NHWC order of a per-dimension list given in NCHW order: [0, 2, 3, 1]
// of 4 values, or of 4 (before, after) pairs.
void PermuteListAttr(tensorflow::NodeDef* n, const std::string& name, int per_dim) {
  auto it = n->mutable_attr()->find(name);
  if (it == n->mutable_attr()->end() || !it->second.has_list()) return;
  auto* values = it->second.mutable_list()->mutable_i();
  if (values->size() != 4 * per_dim) return;  // The kernel reports a bad length.
  const std::vector<int64_t> nchw(values->begin(), values->end());
  int at = 0;
  for (int d : {0, 2, 3, 1}) {
    for (int k = 0; k < per_dim; ++k) values->Set(at++, nchw[d * per_dim + k]);
  }
}

class Rewriter {
 public:
  explicit Rewriter(tensorflow::GraphDef* def) : def_(def) {
    for (const tensorflow::NodeDef& n : def->node()) names_.insert(n.name());
  }

  // Rewrites node `index` (an NCHW convolution or pool).
  void Rewrite(int index) {
    const tensorflow::NodeDef original = def_->node(index);
    const LayoutSpec& spec = *SpecOf(original.op());
    const std::string& name = original.name();
    const std::string& device = original.device();
    const DataType t = original.attr().count("T") ? original.attr().at("T").type() : DT_FLOAT;

    tensorflow::NodeDef nhwc = original;
    nhwc.set_name(spec.image_output ? Unique(name + "/nhwc") : name);
    SetAttr(&nhwc, "data_format", "NHWC");
    PermuteListAttr(&nhwc, "strides", 1);
    PermuteListAttr(&nhwc, "dilations", 1);
    PermuteListAttr(&nhwc, "ksize", 1);
    PermuteListAttr(&nhwc, "explicit_paddings", 2);
    nhwc.mutable_attr()->erase("_output_shapes");
    const std::string to_nhwc = Const(name + "/nchw_to_nhwc", {0, 2, 3, 1}, device);
    for (int i : spec.images) {
      if (i >= nhwc.input_size()) continue;  // The kernel reports the missing input.
      *nhwc.mutable_input(i) = Transpose(name + "/input_" + std::to_string(i) + "_nhwc",
                                         nhwc.input(i), to_nhwc, t, device);
    }
    if (spec.shape_vector >= 0 && spec.shape_vector < nhwc.input_size()) {
      tensorflow::NodeDef* permute = Add(name + "/shape_nhwc", "DataFormatVecPermute", device);
      permute->add_input(nhwc.input(spec.shape_vector));
      SetAttr(permute, "T", DT_INT32);
      SetAttr(permute, "src_format", "NCHW");
      SetAttr(permute, "dst_format", "NHWC");
      *nhwc.mutable_input(spec.shape_vector) = permute->name();
    }
    if (!spec.image_output) {
      *def_->mutable_node(index) = std::move(nhwc);
      return;
    }
    // The node's name now holds its output back in NCHW.
    const std::string to_nchw = Const(name + "/nhwc_to_nchw", {0, 3, 1, 2}, device);
    tensorflow::NodeDef back;
    back.set_name(name);
    back.set_op("Transpose");
    back.set_device(device);
    back.add_input(nhwc.name());
    back.add_input(to_nchw);
    SetAttr(&back, "T", t);
    SetAttr(&back, "Tperm", DT_INT32);
    *def_->add_node() = std::move(nhwc);
    *def_->mutable_node(index) = std::move(back);
  }

 private:
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = absl::StrCat(base, "_", k);
    names_.insert(name);
    return name;
  }

  tensorflow::NodeDef* Add(const std::string& base, const std::string& op,
                           const std::string& device) {
    tensorflow::NodeDef* n = def_->add_node();
    n->set_name(Unique(base));
    n->set_op(op);
    n->set_device(device);
    return n;
  }

  std::string Const(const std::string& base, const std::vector<int32_t>& values,
                    const std::string& device) {
    tensorflow::NodeDef* n = Add(base, "Const", device);
    SetAttr(n, "dtype", DT_INT32);
    SetAttr(n, "value", Tensor::Vec<int32_t>(values));
    return n->name();
  }

  std::string Transpose(const std::string& base, const std::string& input,
                        const std::string& perm, DataType t, const std::string& device) {
    tensorflow::NodeDef* n = Add(base, "Transpose", device);
    n->add_input(input);
    n->add_input(perm);
    SetAttr(n, "T", t);
    SetAttr(n, "Tperm", DT_INT32);
    return n->name();
  }

  tensorflow::GraphDef* def_;
  std::set<std::string> names_;
};

}  // namespace

bool HasNchwConvolutions(const tensorflow::GraphDef& def) {
  for (const tensorflow::NodeDef& n : def.node()) {
    if (IsNchwNode(n)) return true;
  }
  return false;
}

void RewriteNchwToNhwc(tensorflow::GraphDef* def) {
  Rewriter rewriter(def);
  const int original_nodes = def->node_size();  // Nodes added are NHWC or helpers.
  for (int i = 0; i < original_nodes; ++i) {
    if (IsNchwNode(def->node(i))) rewriter.Rewrite(i);
  }
}

}  // namespace dflow
