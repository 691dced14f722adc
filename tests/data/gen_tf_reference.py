#!/usr/bin/env python3
"""Generates dflow's TensorFlow reference data with a real TensorFlow.

Writes, beside this script:
  tf_data_op_defs.json the same for dflow/data's ops (tf.data)
  tf_op_defs.json      the OpDefs (inputs, outputs, attrs, defaults) of every op dflow
                       implements, as TensorFlow registers them;
  golden/<name>.pbtxt  GraphDefs built with tf.compat.v1, exported as text;
  golden/<name>.json   the steps to run on each graph (feeds, fetches, targets) and the
                       values TensorFlow computed.

Run: python3 tests/data/gen_tf_reference.py [--op-defs-only | --golden NAME...]
     (needs `pip install tensorflow-cpu`)
"""
import json
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.framework import op_def_registry

tf1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))

OPS = """Enter RefEnter Exit RefExit NextIteration RefNextIteration LoopCond ControlTrigger
StackV2 StackPushV2 StackPopV2 StackCloseV2 TensorArrayV3 TensorArrayGradV3 TensorArrayWriteV3
TensorArrayReadV3 TensorArrayGatherV3 TensorArrayScatterV3 TensorArrayConcatV3 TensorArraySplitV3
TensorArraySizeV3 TensorArrayCloseV3
Const Placeholder PlaceholderWithDefault Identity IdentityN NoOp Shape Size Rank
Reshape ExpandDims Squeeze Fill ZerosLike OnesLike Cast Pack ConcatV2 Slice StridedSlice
GatherV2 Transpose Tile Range AddV2 Add AddN Sub Mul RealDiv FloorDiv FloorMod Maximum
Minimum Neg Square Sqrt Rsqrt Exp Log Tanh Sigmoid Relu Equal NotEqual Greater Less
GreaterEqual LessEqual LogicalNot LogicalAnd SelectV2 MatMul BiasAdd Sum Mean Max Prod
ArgMax Softmax LogSoftmax SparseSoftmaxCrossEntropyWithLogits
SoftmaxCrossEntropyWithLogits Conv2D MaxPool RandomUniform RandomStandardNormal
TruncatedNormal VarHandleOp ReadVariableOp AssignVariableOp AssignAddVariableOp
AssignSubVariableOp VarIsInitializedOp DestroyResourceOp Abs Min
BroadcastGradientArgs SqrtGrad RsqrtGrad TanhGrad SigmoidGrad UnsortedSegmentSum
ConcatOffset InvertPermutation Pad DataFormatVecPermute
VariableV2 Assign AssignAdd AssignSub IsVariableInitialized
ApplyGradientDescent ApplyMomentum ApplyAdam ApplyAdagrad ApplyRMSProp
ResourceApplyGradientDescent ResourceApplyMomentum ResourceApplyAdam ResourceApplyAdagrad
ResourceApplyRMSProp ReluGrad BiasAddGrad Conv2DBackpropInput Conv2DBackpropFilter
MaxPoolGrad Switch RefSwitch Merge RefMerge
Reciprocal ReciprocalGrad Floor Ceil Round Log1p Expm1 Pow DivNoNan L2Loss StopGradient Assert
ScalarSummary HistogramSummary MergeSummary DenseToDenseSetOperation ShapeN FusedBatchNormV3
FusedBatchNormGradV3 LRN LRNGrad All Any ScatterAdd ScatterSub ScatterUpdate ScatterNd InTopKV2
ArgMin CheckNumerics
Split SplitV Unpack ReverseV2 BroadcastTo Diag DiagPart OneHot PreventGradient Cumsum Cumprod
ClipByValue TopKV2 FusedBatchNorm FusedBatchNormV2 FusedBatchNormGrad FusedBatchNormGradV2
TensorSummaryV2 ImageSummary LogicalOr

Gather ResourceGather GatherNd DynamicPartition DynamicStitch
ParallelDynamicStitch Unique ScatterMul ScatterDiv ScatterMin ScatterMax ResourceScatterAdd
ResourceScatterSub ResourceScatterMul ResourceScatterDiv ResourceScatterMin ResourceScatterMax
ResourceScatterUpdate SparseSegmentSum SparseSegmentMean SparseSegmentSqrtN
SparseSegmentSumWithNumSegments SparseSegmentMeanWithNumSegments SparseSegmentSqrtNWithNumSegments
SparseSegmentSumGrad SparseSegmentMeanGrad SparseSegmentSqrtNGrad UnsortedSegmentMax
UnsortedSegmentMin UnsortedSegmentProd ApplyAdagradV2 ApplyCenteredRMSProp ApplyProximalAdagrad
ApplyProximalGradientDescent ApplyFtrl ApplyFtrlV2 ResourceApplyAdagradV2
ResourceApplyCenteredRMSProp ResourceApplyProximalAdagrad ResourceApplyProximalGradientDescent
ResourceApplyFtrl ResourceApplyFtrlV2 SparseApplyAdagrad SparseApplyAdagradV2 SparseApplyMomentum
SparseApplyRMSProp SparseApplyCenteredRMSProp SparseApplyProximalAdagrad
SparseApplyProximalGradientDescent SparseApplyFtrl SparseApplyFtrlV2 ResourceSparseApplyAdagrad
ResourceSparseApplyAdagradV2 ResourceSparseApplyMomentum ResourceSparseApplyRMSProp
ResourceSparseApplyCenteredRMSProp ResourceSparseApplyProximalAdagrad
ResourceSparseApplyProximalGradientDescent ResourceSparseApplyFtrl
ResourceSparseApplyFtrlV2 LogUniformCandidateSampler UniformCandidateSampler ComputeAccidentalHits
SparseToDense SparseReshape SparseFillEmptyRows StringToHashBucketFast Bucketize SparseCross DecodeRaw
VariableShape

EmptyTensorList TensorListReserve TensorListFromTensor TensorListStack TensorListGetItem
TensorListSetItem TensorListPushBack TensorListPopBack TensorListLength
TensorListElementShape TensorListSplit TensorListConcatV2 Sin Cos

ParseExampleV2 ParseSingleExample ParseExample DecodeCSV StringToNumber SerializeTensor ParseTensor
StringSplit StringSplitV2 ReadFile DecodePng DecodeJpeg StridedSliceGrad

RandomShuffleQueueV2 PaddingFIFOQueueV2 QueueDequeueUpToV2 QueueIsClosedV2 TextLineReaderV2
TFRecordReaderV2 FixedLengthRecordReaderV2 WholeFileReaderV2 IdentityReaderV2 ReaderReadV2
ReaderReadUpToV2 ReaderNumRecordsProducedV2 ReaderNumWorkUnitsCompletedV2 ReaderResetV2
MatchingFiles RandomShuffle ResourceCountUpTo CountUpTo ReaderSerializeStateV2 ReaderRestoreStateV2
Softplus SoftplusGrad AvgPool AvgPoolGrad""".split()
# Functional ops: dflow lowers them into Switch/Merge and inlined bodies before
# placement (dflow/runtime/function.h), so they have no kernel.
LOWERED_OPS = "If StatelessIf While StatelessWhile PartitionedCall StatefulPartitionedCall".split()
# tf.data's ops (dflow/data): checked by dflow/data/data_op_registry_test.cc
# against tf_data_op_defs.json.
DATA_OPS = """TensorSliceDataset TensorDataset RangeDataset BatchDatasetV2 RepeatDataset
TakeDataset SkipDataset MapDataset FlatMapDataset TFRecordDataset OneShotIterator
IteratorV2 MakeIterator IteratorGetNext IteratorToStringHandle ShuffleDataset
PrefetchDataset ParallelMapDatasetV2 FilterDataset PaddedBatchDatasetV2 ZipDataset
ConcatenateDataset InterleaveDataset ParallelInterleaveDatasetV4 CacheDataset ShardDataset
AnonymousIteratorV2 AnonymousIteratorV3 DeleteIterator IteratorFromStringHandle
IteratorFromStringHandleV2 IteratorGetNextAsOptional OptionalHasValue OptionalGetValue
OptionsDataset ModelDataset OptimizeDataset OptimizeDatasetV2 CacheDatasetV2 AnonymousMemoryCache
DummyMemoryCache DeleteMemoryCache TextLineDataset FixedLengthRecordDataset
FixedLengthRecordDatasetV2 ShuffleAndRepeatDataset ShuffleAndRepeatDatasetV2 ShuffleDatasetV2
ShuffleDatasetV3 AnonymousSeedGenerator DummySeedGenerator DeleteSeedGenerator""".split()


def arg_json(arg):
    out = {"name": arg.name}
    if arg.type:
        out["type"] = tf.dtypes.as_dtype(arg.type).name
    for field in ("type_attr", "number_attr", "type_list_attr"):
        if getattr(arg, field):
            out[field] = getattr(arg, field)
    if arg.is_ref:
        out["is_ref"] = True
    return out


def attr_json(attr):
    out = {"name": attr.name, "type": attr.type}
    if attr.HasField("default_value"):
        out["default"] = text_format.MessageToString(attr.default_value, as_one_line=True)
    if attr.allowed_values.list.type:
        out["allowed_types"] = sorted(tf.dtypes.as_dtype(t).name
                                      for t in attr.allowed_values.list.type)
    if attr.allowed_values.list.s:
        out["allowed_values"] = sorted(s.decode() for s in attr.allowed_values.list.s)
    if attr.has_minimum:
        out["minimum"] = attr.minimum
    return out


def write_op_defs():
    write_op_def_file(OPS + LOWERED_OPS, "tf_op_defs.json")
    write_op_def_file(DATA_OPS, "tf_data_op_defs.json")


def write_op_def_file(names, file_name):
    defs = {}
    for name in names:
        op = op_def_registry.get(name)
        defs[name] = {
            "inputs": [arg_json(a) for a in op.input_arg],
            "outputs": [arg_json(a) for a in op.output_arg],
            "attrs": [attr_json(a) for a in op.attr],
            "is_stateful": op.is_stateful,
        }
        if name in LOWERED_OPS:
            defs[name]["lowered"] = True
    with open(os.path.join(HERE, file_name), "w") as f:
        json.dump(defs, f, indent=1, sort_keys=True)


def tensor_json(value):
    value = np.asarray(value)
    dtype = tf.dtypes.as_dtype(value.dtype).name
    values = value.reshape(-1).tolist()
    if value.dtype == np.object_ or value.dtype.kind == "S":
        values = [v.decode() if isinstance(v, bytes) else v for v in values]
    return {"dtype": dtype, "shape": list(value.shape), "values": values}


class Golden:
    """Collects the steps of one golden graph while running them in TensorFlow."""

    def __init__(self, name, device_count=None):
        self.name = name
        self.graph = tf.Graph()
        self.config = {"device_count": device_count} if device_count else {}
        self.steps = []
        self.sess = None

    def session(self):
        if self.sess is None:
            config = tf1.ConfigProto(device_count=self.config.get("device_count", {}))
            self.sess = tf1.Session(graph=self.graph, config=config)
        return self.sess

    def run(self, fetches=(), targets=(), feeds=None, tolerance=1e-5):
        feeds = feeds or {}
        feed_dict = {self.graph.get_tensor_by_name(k): v for k, v in feeds.items()}
        names = [t.name for t in fetches]
        results = self.session().run(list(fetches) + list(targets), feed_dict=feed_dict)
        self.steps.append({
            "feeds": {k: tensor_json(v) for k, v in feeds.items()},
            "fetches": names,
            "targets": [t.name for t in targets],
            "expected": [tensor_json(r) for r in results[:len(fetches)]],
            "tolerance": tolerance,
        })

    def save(self):
        out_dir = os.path.join(HERE, "golden")
        os.makedirs(out_dir, exist_ok=True)
        tf.io.write_graph(self.graph.as_graph_def(), out_dir, self.name + ".pbtxt", as_text=True)
        with open(os.path.join(out_dir, self.name + ".json"), "w") as f:
            json.dump({"graph": self.name + ".pbtxt", "config": self.config,
                       "steps": self.steps}, f, indent=1)


def rand(*shape, seed=0):
    return np.random.RandomState(seed).uniform(-2, 2, size=shape).astype(np.float32)


def mlp_forward():
    g = Golden("mlp_forward")
    with g.graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 6], name="x")
        w1 = tf.constant(rand(6, 5, seed=1), name="w1")
        b1 = tf.constant(rand(5, seed=2), name="b1")
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1), name="h")
        w2 = tf.constant(rand(5, 3, seed=3), name="w2")
        logits = tf.matmul(h, w2, name="logits")
        probs = tf.nn.softmax(logits, name="probs")
        labels = tf1.placeholder(tf.int32, [None], name="labels")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        pred = tf.argmax(probs, axis=1, name="pred")
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.cast(pred, tf.int32), labels), tf.float32),
                             name="accuracy")
    for seed, batch in ((4, 4), (5, 7)):
        g.run([probs, loss, pred, acc],
              feeds={"x:0": rand(batch, 6, seed=seed),
                     "labels:0": np.arange(batch, dtype=np.int32) % 3})
    g.save()


def math_ops():
    g = Golden("math_ops")
    with g.graph.as_default():
        a = tf.constant(rand(2, 1, 3, seed=6), name="a")
        b = tf.constant(rand(4, 1, seed=7), name="b")
        i = tf.constant([[-7, 7], [9, -9]], dtype=tf.int32, name="i")
        j = tf.constant([2, -4], dtype=tf.int32, name="j")
        outs = [
            tf.add(a, b), a - b, a * b, tf.math.truediv(a, b + 3.0), tf.maximum(a, b),
            tf.minimum(a, b), -a, tf.square(a), tf.sqrt(tf.abs(a) + 1e-3),
            tf.math.rsqrt(tf.abs(b) + 0.5), tf.exp(a), tf.math.log(tf.abs(a) + 0.1),
            tf.tanh(a), tf.sigmoid(a), tf.nn.relu(a), tf.add_n([a, a, a]),
            tf.math.floordiv(i, j), tf.math.floormod(i, j),
            tf.math.floordiv(a, 0.7), tf.math.floormod(a, -0.7),
            tf.cast(a * 3, tf.int32), tf.cast(i, tf.float32), tf.cast(a, tf.bool),
            tf.equal(i, -7), tf.not_equal(i, 7), tf.greater(a, b), tf.less(a, b),
            tf.greater_equal(i, 7), tf.less_equal(i, -7),
            tf.logical_and(tf.greater(a, 0.0), tf.less(b, 1.0)), tf.logical_not(tf.greater(a, 0.0)),
            tf.where(tf.greater(a, b), a, b),
            tf.reduce_sum(a, axis=[0, 2]), tf.reduce_sum(a, axis=1, keepdims=True),
            tf.reduce_mean(a), tf.reduce_max(a, axis=-1), tf.reduce_prod(a, axis=[0]),
            tf.reduce_sum(i, axis=0), tf.reduce_mean(i, axis=1),
            tf.argmax(a, axis=2), tf.argmax(i, axis=0, output_type=tf.int32),
            tf.matmul(tf.reshape(a, [2, 3]), tf.reshape(a, [2, 3]), transpose_a=True),
            tf.matmul(tf.reshape(a, [2, 3]), tf.reshape(a, [2, 3]), transpose_b=True),
        ]
    g.run(outs)
    g.save()


def array_ops():
    g = Golden("array_ops")
    with g.graph.as_default():
        x = tf.constant(np.arange(24, dtype=np.float32).reshape(2, 3, 4), name="x")
        idx = tf.constant([2, 0], name="idx")
        p = tf1.placeholder_with_default(tf.constant([1.5, 2.5]), [2], name="p")
        outs = [
            tf.reshape(x, [4, -1]), tf.transpose(x, [2, 0, 1]), tf.concat([x, x], axis=-1),
            tf.stack([x, x], axis=1), tf.slice(x, [0, 1, 1], [-1, 2, 2]),
            x[1:, ::-1, 1::2], x[..., 0], x[:, tf.newaxis, 2], x[-1, -2:, :-1],
            tf.gather(x, idx, axis=1), tf.gather(x, [1, 0, 1]), tf.tile(x, [1, 2, 1]),
            tf.range(2, 11, 3), tf.range(1.0, 2.0, 0.25), tf.expand_dims(x, -1),
            tf.squeeze(tf.reshape(x, [2, 1, 12, 1]), axis=[1]), tf.fill([2, 3], 7.0),
            tf.zeros_like(x), tf.ones_like(idx), tf.shape(x), tf.size(x), tf.rank(x),
            tf.identity(p), tf.identity_n([x, idx])[1],
            tf.shape(x, out_type=tf.int64),
        ]
    g.run(outs)
    g.run([outs[22]], feeds={"p:0": np.array([9.0, 8.0], np.float32)})
    g.save()


def conv_net():
    g = Golden("conv_net")
    with g.graph.as_default():
        img = tf1.placeholder(tf.float32, [None, 9, 9, 2], name="img")
        f1 = tf.constant(rand(3, 3, 2, 4, seed=11), name="f1")
        c1 = tf.nn.conv2d(img, f1, strides=1, padding="SAME", name="c1")
        p1 = tf.nn.max_pool2d(tf.nn.relu(c1), ksize=2, strides=2, padding="SAME", name="p1")
        f2 = tf.constant(rand(2, 2, 4, 3, seed=12), name="f2")
        c2 = tf.nn.conv2d(p1, f2, strides=2, padding="VALID", name="c2")
        p2 = tf.nn.max_pool2d(c2, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
        logits = tf.reshape(p2, [-1, 3], name="logits")
        onehot = tf.one_hot([0, 2, 1], 3) if False else tf.constant(
            [[1, 0, 0], [0, 0.5, 0.5]], tf.float32)
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=logits)
        logsm = tf.nn.log_softmax(logits * 30.0)
    g.run([c1, p1, c2, p2, xent, logsm], feeds={"img:0": rand(2, 9, 9, 2, seed=13)},
          tolerance=1e-4)
    g.save()


def variables():
    g = Golden("variables")
    with g.graph.as_default():
        v = tf1.get_variable("v", initializer=tf.constant([1.0, 2.0, 3.0]), use_resource=True)
        init = tf1.global_variables_initializer()
        add = v.assign_add([0.5, 0.5, 0.5], read_value=False)
        sub = v.assign_sub([1.0, 0.0, 1.0], read_value=False)
        read = tf.identity(v.read_value(), name="read")
        is_init = tf1.is_variable_initialized(v) if False else \
            tf.raw_ops.VarIsInitializedOp(resource=v.handle, name="is_init")
    g.run([is_init])
    g.run([], targets=[init])
    g.run([read, is_init])
    for _ in range(3):
        g.run([], targets=[add])
    g.run([read])
    g.run([], targets=[sub])
    g.run([read])
    g.save()


def random_ops():
    g = Golden("random_ops")
    with g.graph.as_default():
        tf1.set_random_seed(7)
        u = tf.random.uniform([3, 4], seed=1, name="u")
        n = tf.random.normal([5], seed=2, dtype=tf.float64, name="n")
        t = tf.random.truncated_normal([6], seed=3, name="t")
    g.run([u, n, t], tolerance=1e-5)
    g.run([u, n, t], tolerance=1e-5)  # The second run draws the next values.
    g.save()


def multi_device():
    g = Golden("multi_device", device_count={"CPU": 4})
    with g.graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 2], name="x")
        parts = []
        for d in range(4):
            with tf.device("/device:CPU:%d" % d):
                parts.append(tf.matmul(x, x + float(d)) * (d + 1))
        with tf.device("/device:CPU:3"):
            total = tf.add_n(parts, name="total")
    g.run([total], feeds={"x:0": rand(2, 2, seed=21)})
    g.save()


def small_ops():
    """The array, math and nn ops TF1 programs and TensorFlow's own gradients
    emit (Split, SplitV, Unpack, ReverseV2, OneHot, Diag, DiagPart, Cumsum,
    Cumprod, ClipByValue, BroadcastTo, TopKV2, FusedBatchNorm in NCHW), each
    with the gradient graph tf.gradients builds for it."""
    g = Golden("small_ops")
    with g.graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 6], name="x")
        p = tf1.placeholder(tf.float32, [2, 3], name="p")
        ids = tf1.placeholder(tf.int32, [4], name="ids")
        a, b, c = tf.split(x, 3, axis=1)
        d, e = tf.split(x, [2, -1], axis=-1)
        rows = tf.unstack(x, axis=0)
        bn_x = tf.reshape(x * 3.0, [2, 2, 1, 3])  # NCHW: 2 channels.
        bn, _, _ = tf1.nn.fused_batch_norm(bn_x, [1.5, 0.5], [0.1, -0.2], epsilon=0.001,
                                           data_format="NCHW")
        top = tf.nn.top_k(x + tf.range(6.0) * 0.01, k=3)
        outs = [
            a * c + b, d, tf.tanh(e), rows[1] * rows[0],
            tf.reverse(x, [0, 1]),
            tf.one_hot(ids, 5, on_value=2.0, off_value=-1.0),
            tf.one_hot(ids, 5, axis=0),
            tf.linalg.tensor_diag(p), tf.linalg.tensor_diag_part(tf.linalg.tensor_diag(p) * 2.0),
            tf.math.cumsum(x, axis=1), tf.math.cumsum(x, axis=0, exclusive=True, reverse=True),
            tf.math.cumprod(p + 2.0, axis=1), tf.math.cumprod(p + 2.0, axis=1, exclusive=True),
            tf.raw_ops.ClipByValue(t=p, clip_value_min=-0.5, clip_value_max=0.5),
            tf.broadcast_to(tf.reshape(tf.slice(p, [0, 0], [1, 3]), [3]), [4, 3]),
            top.values, top.indices, bn,
        ]
        loss = tf.add_n([tf.reduce_sum(tf.square(o + 0.3)) for o in outs
                         if o.dtype == tf.float32], name="loss")
        grads = tf.gradients(loss, [x, p])
    g.run(outs + [loss] + grads,
          feeds={"x:0": rand(2, 6, seed=31), "p:0": rand(2, 3, seed=32),
                 "ids:0": np.array([0, 4, -1, 7], np.int32)},
          tolerance=1e-4)
    g.save()


def sparse_embedding():
    """word2vec / wide & deep in small: a 2-way partitioned embedding (mod strategy)
    and an embedding_lookup_sparse mean, trained by Adagrad's sparse updates, and a
    wide weight per id trained by FTRL's, as TensorFlow 1.x builds them."""
    g = Golden("sparse_embedding")

    def init(full):
        def make(shape, dtype=None, partition_info=None):
            offset = partition_info.single_offset(shape) if partition_info else 0
            return tf.constant(full[offset:offset + shape[0]])
        return make

    with g.graph.as_default():
        ids = tf1.placeholder(tf.int64, [None], name="ids")
        labels = tf1.placeholder(tf.int32, [None], name="labels")
        bag = tf1.sparse_placeholder(tf.int64, name="bag")
        emb = tf1.get_variable("emb", shape=[10, 3], initializer=init(rand(10, 3, seed=30)),
                               partitioner=tf1.fixed_size_partitioner(2), use_resource=False)
        wide = tf1.get_variable("wide", shape=[10, 4], initializer=init(rand(10, 4, seed=31)),
                                use_resource=True)
        w = tf1.get_variable("w", initializer=tf.constant(rand(3, 4, seed=32)), use_resource=True)
        deep = (tf1.nn.embedding_lookup(emb, ids, partition_strategy="mod") +
                tf1.nn.embedding_lookup_sparse(emb, bag, None, partition_strategy="mod",
                                              combiner="mean"))
        logits = tf.matmul(deep, w) + tf.gather(wide, ids)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        deep_vars = list(emb) + [w]
        train = tf.group(
            tf1.train.AdagradOptimizer(0.3).minimize(loss, var_list=deep_vars),
            tf1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01,
                                    l2_regularization_strength=0.02).minimize(
                                        loss, var_list=[wide]), name="train")
        init_op = tf1.global_variables_initializer()
        values = [tf.identity(v, name="value_%d" % i) for i, v in enumerate(list(emb) + [w, wide])]
    g.run([], targets=[init_op])
    batches = [([1, 4, 4, 7], [0, 3, 3, 1], ([[0, 0], [0, 1], [1, 0], [2, 0], [3, 0], [3, 1]],
                                            [2, 5, 4, 9, 0, 2])),
               ([9, 0, 5], [2, 2, 0], ([[0, 0], [1, 0], [1, 1], [2, 0]], [3, 3, 8, 1]))]
    for step in range(4):
        batch_ids, batch_labels, (bag_indices, bag_values) = batches[step % 2]
        n = len(batch_ids)
        g.run([loss], targets=[train], tolerance=1e-4,
              feeds={"ids:0": np.array(batch_ids, np.int64),
                     "labels:0": np.array(batch_labels, np.int32),
                     "bag/indices:0": np.array(bag_indices, np.int64),
                     "bag/values:0": np.array(bag_values, np.int64),
                     "bag/shape:0": np.array([n, 2], np.int64)})
    g.run(values, tolerance=1e-4)
    g.save()


def word2vec_sampled():
    """word2vec's training step: a resource embedding and softmax weights trained by
    SGD's sparse updates (resource scatter-adds) on sampled_softmax_loss, with a
    log-uniform candidate sampler and accidental hits removed. The draw is dflow's own,
    so only what does not depend on it is compared: the true classes' expected counts
    and that training steps run."""
    g = Golden("word2vec_sampled")
    with g.graph.as_default():
        words = tf1.placeholder(tf.int64, [None], name="words")
        contexts = tf1.placeholder(tf.int64, [None, 1], name="contexts")
        emb = tf1.get_variable("emb", initializer=tf.constant(rand(20, 4, seed=40)),
                               use_resource=True)
        weights = tf1.get_variable("softmax_w", initializer=tf.constant(rand(20, 4, seed=41)),
                                   use_resource=True)
        biases = tf1.get_variable("softmax_b", initializer=tf.zeros([20]), use_resource=True)
        sampled = tf.random.log_uniform_candidate_sampler(
            true_classes=contexts, num_true=1, num_sampled=6, unique=False, range_max=20,
            seed=5, name="sampler")
        loss = tf.reduce_mean(tf.nn.sampled_softmax_loss(
            weights, biases, labels=contexts, inputs=tf.nn.embedding_lookup(emb, words),
            num_sampled=6, num_classes=20, sampled_values=sampled,
            remove_accidental_hits=True), name="loss")
        train = tf1.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
        true_expected = tf.identity(sampled[1], name="true_expected")
        hits = tf.nn.compute_accidental_hits(
            tf.constant([[3], [5]], tf.int64), tf.constant([5, 3, 3, 0], tf.int64), num_true=1)
        hits = [tf.identity(h, name="hits_%d" % i) for i, h in enumerate(hits)]
        init_op = tf1.global_variables_initializer()
    g.run([], targets=[init_op])
    feeds = {"words:0": np.array([1, 7, 7, 19], np.int64),
             "contexts:0": np.array([[2], [0], [13], [7]], np.int64)}
    for _ in range(3):
        g.run([true_expected], targets=[train], feeds=feeds)
    g.run(hits)
    g.save()


def wide_deep():
    """Wide & deep with TensorFlow 1.x's feature columns: hashed and bucketized
    columns in a linear model trained by FTRL, an embedding column (sqrtn combiner)
    and a numeric column under a dense layer trained by Adagrad."""
    g = Golden("wide_deep")
    with g.graph.as_default():
        fc = tf1.feature_column
        word = fc.categorical_column_with_hash_bucket("word", 20)
        age = fc.numeric_column("age")
        age_buckets = fc.bucketized_column(age, [18.0, 30.0, 50.0])
        features = {"word": tf1.sparse_placeholder(tf.string, name="word"),
                    "age": tf1.placeholder(tf.float32, [None, 1], name="age")}
        labels = tf1.placeholder(tf.float32, [None, 1], name="labels")
        with tf1.variable_scope("wide"):
            wide = fc.linear_model(features, [word, age_buckets])
        embedding = fc.embedding_column(word, 3, combiner="sqrtn",
                                        initializer=tf1.constant_initializer(rand(20, 3, seed=50)))
        with tf1.variable_scope("deep"):
            deep_in = fc.input_layer(features, [embedding, age])
            w = tf1.get_variable("w", initializer=tf.constant(rand(4, 1, seed=51)))
            deep = tf.matmul(tf.nn.relu(deep_in), w)
        logits = wide + deep
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits), name="loss")
        wide_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "wide")
        deep_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "deep")
        train = tf.group(
            tf1.train.FtrlOptimizer(0.3, l1_regularization_strength=0.01).minimize(
                loss, var_list=wide_vars),
            tf1.train.AdagradOptimizer(0.2).minimize(loss, var_list=deep_vars), name="train")
        init_op = tf1.global_variables_initializer()
        values = [tf.identity(v, name="value_%d" % i) for i, v in enumerate(wide_vars + deep_vars)]
    g.run([], targets=[init_op])
    batches = [(["cat", "dog", "cat", "fish", "bird"], [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]],
                [[12.0], [25.0], [61.0]], [[1.0], [0.0], [1.0]]),
               (["dog", "eel", "ant"], [[0, 0], [2, 0], [2, 1]], [[30.0], [17.0], [45.0]],
                [[0.0], [1.0], [1.0]])]
    for step in range(4):
        words, indices, ages, batch_labels = batches[step % 2]
        g.run([loss], targets=[train], tolerance=1e-4,
              feeds={"word/indices:0": np.array(indices, np.int64),
                     "word/values:0": np.array(words, object),
                     "word/shape:0": np.array([len(ages), 2], np.int64),
                     "age:0": np.array(ages, np.float32),
                     "labels:0": np.array(batch_labels, np.float32)})
    g.run(values, tolerance=1e-4)
    g.save()


if __name__ == "__main__":
    import sys
    write_op_defs()
    if sys.argv[1:] == ["--op-defs-only"]:
        sys.exit(0)
    if sys.argv[1:2] == ["--golden"]:  # Only the named golden graphs: --golden small_ops
        for name in sys.argv[2:]:
            globals()[name]()
        sys.exit(0)
    for make in (mlp_forward, math_ops, array_ops, conv_net, variables, random_ops,
                 multi_device, small_ops, sparse_embedding, word2vec_sampled, wide_deep):
        make()
    print("wrote", HERE)
