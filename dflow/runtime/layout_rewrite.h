// Convolutions and pools given data_format="NCHW" (channels_first models,
// which TensorFlow 1.x users build for GPUs) run on dflow's NHWC kernels:
// every Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool,
// MaxPoolGrad, AvgPool and AvgPoolGrad in NCHW is rewritten into its NHWC form
// between transposes, on the node's device, before placement:
//
//   x (NCHW) -> Transpose [0,2,3,1] -> Conv2D (NHWC, strides etc. permuted)
//            -> Transpose [0,3,1,2] -> consumers
//
// The output transpose takes the node's name, so consumers, fetches, control
// edges and colocation constraints that name the node see the same tensor;
// the NHWC node is "<name>/nhwc". Shape vectors in NCHW order (a gradient's
// input_sizes, orig_input_shape) are reordered by DataFormatVecPermute. A
// filter is HWIO in both formats and is not moved. TensorFlow's CPU kernels
// refuse NCHW; on a GPU TensorFlow hands it to cuDNN directly.
#ifndef DFLOW_RUNTIME_LAYOUT_REWRITE_H_
#define DFLOW_RUNTIME_LAYOUT_REWRITE_H_

#include "dflow/proto/graph.pb.h"

namespace dflow {

// True when `def`'s top-level graph has a node RewriteNchwToNhwc rewrites.
bool HasNchwConvolutions(const tensorflow::GraphDef& def);

// Rewrites each such node of `def` as described above. Nodes of the
// function library are left as they are.
void RewriteNchwToNhwc(tensorflow::GraphDef* def);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_LAYOUT_REWRITE_H_
