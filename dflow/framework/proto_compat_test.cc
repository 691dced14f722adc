// Checks that every message, enum and service of dflow/proto is
// wire-compatible with TensorFlow's, against tests/data/tf_proto_fields.json
// (TensorFlow's own definitions, dumped by tests/data/gen_tf_proto_fields.py),
// and parses messages that TensorFlow's descriptors serialised.
//
// Rules (what keeps the wire format identical):
//   - every field we declare exists in TensorFlow's message under the same
//     name, with the same number, label and type; a message-typed field of
//     TensorFlow's may be declared as opaque `bytes` (same wire encoding);
//   - a field's message type has TensorFlow's name, or (when ours is named
//     differently) itself follows these rules against TensorFlow's type;
//   - every enum value we declare has TensorFlow's number;
//   - services have TensorFlow's full names (the gRPC path is
//     "/<service full name>/<method>"), all of its methods, same messages;
//   - the one exception: dflow's own fields, named dflow_* with a number of
//     1000 or more that TensorFlow's message does not use. dflow sets them
//     only between dflow tasks; TensorFlow's parsers keep them as unknown
//     fields.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/proto/attr_value.pb.h"
#include "dflow/proto/checkpoint_state.pb.h"
#include "dflow/proto/cluster.pb.h"
#include "dflow/proto/data_plane.pb.h"
#include "dflow/proto/config.pb.h"
#include "dflow/proto/device_attributes.pb.h"
#include "dflow/proto/error_codes.pb.h"
#include "dflow/proto/full_type.pb.h"
#include "dflow/proto/function.pb.h"
#include "dflow/proto/graph.pb.h"
#include "dflow/proto/master.pb.h"
#include "dflow/proto/master_service.pb.h"
#include "dflow/proto/named_tensor.pb.h"
#include "dflow/proto/node_def.pb.h"
#include "dflow/proto/op_def.pb.h"
#include "dflow/proto/resource_handle.pb.h"
#include "dflow/proto/step_stats.pb.h"
#include "dflow/proto/summary.pb.h"
#include "dflow/proto/tensor.pb.h"
#include "dflow/proto/tensor_bundle.pb.h"
#include "dflow/proto/tensor_shape.pb.h"
#include "dflow/proto/tensorflow_server.pb.h"
#include "dflow/proto/types.pb.h"
#include "dflow/proto/worker.pb.h"
#include "dflow/proto/worker_service.pb.h"

namespace tensorflow {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::DescriptorPool;
using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::FileDescriptor;
using ::google::protobuf::ServiceDescriptor;
using ::nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kDataDir = ::dflow::TestDataDir();

json LoadTfFields() {
  std::ifstream in(kDataDir + "/tf_proto_fields.json");
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::string ReadHexFixture(const std::string& name) {
  std::ifstream in(kDataDir + "/" + name);
  std::string hex;
  in >> hex;
  return absl::HexStringToBytes(hex);
}

// A file with only services has no message whose descriptor() would make
// the linker keep its generated code; naming its table does.
const FileDescriptor* ServiceFile(const ::google::protobuf::internal::DescriptorTable& table) {
  return DescriptorPool::generated_pool()->FindFileByName(table.filename);
}

// One entry per dflow/proto/*.proto; EveryProtoFileIsChecked keeps it whole.
std::vector<const FileDescriptor*> OurFiles() {
  return {
      AttrValue::descriptor()->file(),
      CheckpointState::descriptor()->file(),
      JobDef::descriptor()->file(),
      ConfigProto::descriptor()->file(),
      DeviceAttributes::descriptor()->file(),
      error::Code_descriptor()->file(),
      FullTypeDef::descriptor()->file(),
      FunctionDefLibrary::descriptor()->file(),
      GraphDef::descriptor()->file(),
      RunStepRequest::descriptor()->file(),
      ServiceFile(descriptor_table_dflow_2fproto_2fmaster_5fservice_2eproto),
      NamedTensorProto::descriptor()->file(),
      NodeDef::descriptor()->file(),
      OpDef::descriptor()->file(),
      ResourceHandleProto::descriptor()->file(),
      StepStats::descriptor()->file(),
      Summary::descriptor()->file(),
      TensorProto::descriptor()->file(),
      BundleEntryProto::descriptor()->file(),
      TensorShapeProto::descriptor()->file(),
      ServerDef::descriptor()->file(),
      DataType_descriptor()->file(),
      RunGraphRequest::descriptor()->file(),
      ServiceFile(descriptor_table_dflow_2fproto_2fworker_5fservice_2eproto),
  };
}

void CollectMessages(const Descriptor* d, std::vector<const Descriptor*>* out) {
  out->push_back(d);
  for (int i = 0; i < d->nested_type_count(); ++i) {
    CollectMessages(d->nested_type(i), out);
  }
}

std::vector<const Descriptor*> OurMessages() {
  std::vector<const Descriptor*> out;
  for (const FileDescriptor* f : OurFiles()) {
    for (int i = 0; i < f->message_type_count(); ++i) {
      CollectMessages(f->message_type(i), &out);
    }
  }
  return out;
}

std::vector<const EnumDescriptor*> OurEnums() {
  std::vector<const EnumDescriptor*> out;
  for (const FileDescriptor* f : OurFiles()) {
    for (int i = 0; i < f->enum_type_count(); ++i) out.push_back(f->enum_type(i));
  }
  for (const Descriptor* d : OurMessages()) {
    for (int i = 0; i < d->enum_type_count(); ++i) out.push_back(d->enum_type(i));
  }
  return out;
}

std::string TypeName(FieldDescriptor::Type type) {
  // Matches the JSON's spelling, e.g. "TYPE_INT64".
  return absl::AsciiStrToUpper(absl::StrCat("TYPE_", FieldDescriptor::TypeName(type)));
}

std::string LabelName(FieldDescriptor::Label label) {
  switch (label) {
    case FieldDescriptor::LABEL_OPTIONAL:
      return "LABEL_OPTIONAL";
    case FieldDescriptor::LABEL_REQUIRED:
      return "LABEL_REQUIRED";
    case FieldDescriptor::LABEL_REPEATED:
      return "LABEL_REPEATED";
  }
  return "?";
}

// Compares our messages with TensorFlow's (the JSON's "messages") and
// collects every difference as "<our message>.<field>: <what differs>".
class MessageChecker {
 public:
  static constexpr int kFirstDflowField = 1000;

  explicit MessageChecker(const json& tf_messages) : tf_(tf_messages) {}

  // Checks `ours` against TensorFlow's message named `tf_name`.
  void Check(const Descriptor* ours, const std::string& tf_name) {
    if (!checked_.insert(ours->full_name() + "=" + tf_name).second) return;
    covered_.insert(ours->full_name());
    if (!tf_.contains(tf_name)) {
      problems_.push_back(absl::StrCat(ours->full_name(), ": TensorFlow has no message ", tf_name));
      return;
    }
    for (int i = 0; i < ours->field_count(); ++i) {
      CheckField(ours->field(i), tf_[tf_name]);
    }
  }

  bool Covered(const Descriptor* d) const { return covered_.count(d->full_name()); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void CheckField(const FieldDescriptor* f, const json& tf_fields) {
    const std::string where = f->full_name();
    if (absl::StartsWith(f->name(), "dflow_") && f->number() >= kFirstDflowField) {
      for (const auto& [name, tf] : tf_fields.items()) {
        if (tf["number"] == f->number()) {
          problems_.push_back(absl::StrCat(where, ": number ", f->number(),
                                           " is TensorFlow's field ", name));
        }
      }
      return;
    }
    if (!tf_fields.contains(f->name())) {
      problems_.push_back(where + ": TensorFlow has no such field");
      return;
    }
    const json& tf = tf_fields[f->name()];
    if (tf["number"] != f->number()) {
      problems_.push_back(
          absl::StrCat(where, ": number ", f->number(), ", TensorFlow's ", tf["number"].dump()));
    }
    if (tf["label"] != LabelName(f->label())) {
      problems_.push_back(absl::StrCat(where, ": label ", LabelName(f->label()), ", TensorFlow's ",
                                       tf["label"].dump()));
    }
    const std::string type = TypeName(f->type());
    const bool opaque = type == "TYPE_BYTES" && tf["type"] == "TYPE_MESSAGE";
    if (tf["type"] != type && !opaque) {
      problems_.push_back(
          absl::StrCat(where, ": type ", type, ", TensorFlow's ", tf["type"].dump()));
      return;
    }
    const std::string tf_type = tf["type_name"];
    if (f->type() == FieldDescriptor::TYPE_ENUM && f->enum_type()->full_name() != tf_type) {
      problems_.push_back(
          absl::StrCat(where, ": enum ", f->enum_type()->full_name(), ", TensorFlow's ", tf_type));
    }
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      const Descriptor* type = f->message_type();
      // Protobuf's own types (google.protobuf.Any) are the same on both sides.
      const bool shared =
          type->full_name() == tf_type && !absl::StartsWith(type->file()->name(), "dflow/proto/");
      // Same name: checked on its own. Another name: same structure needed.
      if (!shared) Check(type, tf_type);
    }
  }

  const json& tf_;
  std::set<std::string> checked_;
  std::set<std::string> covered_;
  std::vector<std::string> problems_;
};

TEST(ProtoCompat, EveryProtoFileIsChecked) {
  std::set<std::string> on_disk;
  const std::filesystem::path dir =
      std::filesystem::path(kDataDir) / ".." / ".." / "dflow" / "proto";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".proto") {
      on_disk.insert("dflow/proto/" + entry.path().filename().string());
    }
  }
  std::set<std::string> checked;
  for (const FileDescriptor* f : OurFiles()) {
    ASSERT_NE(f, nullptr);
    checked.insert(f->name());
  }
  // dflow's own messages (package dflow), which TensorFlow has no copy of.
  for (const FileDescriptor* f : {dflow::DataPlanePort::descriptor()->file()}) {
    EXPECT_EQ(f->package(), "dflow") << f->name();
    checked.insert(f->name());
  }
  EXPECT_EQ(checked, on_disk) << "add new .proto files to OurFiles() (or, for dflow's own "
                                 "messages, to the list above)";
}

TEST(ProtoCompat, MessagesMatchTensorFlow) {
  const json tf = LoadTfFields();
  ASSERT_TRUE(tf.is_object()) << "unreadable tf_proto_fields.json";
  MessageChecker checker(tf["messages"]);
  for (const Descriptor* d : OurMessages()) {
    if (tf["messages"].contains(d->full_name())) checker.Check(d, d->full_name());
  }
  EXPECT_THAT(checker.problems(), IsEmpty()) << absl::StrJoin(checker.problems(), "\n");
  // A message TensorFlow has under another name must be the type of a field
  // that was compared structurally.
  for (const Descriptor* d : OurMessages()) {
    EXPECT_TRUE(checker.Covered(d)) << d->full_name() << " is not TensorFlow's";
  }
}

TEST(ProtoCompat, CheckerReportsWrongNumbersTypesAndNames) {
  json tf = LoadTfFields()["messages"];
  tf["tensorflow.RunGraphRequest"]["step_id"]["number"] = 99;
  tf["tensorflow.RunGraphRequest"]["recv_key"]["label"] = "LABEL_OPTIONAL";
  tf["tensorflow.RunGraphRequest"]["is_partial"]["type"] = "TYPE_INT32";
  tf["tensorflow.RunGraphRequest"].erase("request_id");
  // A dflow_ field is ours unless TensorFlow takes its number.
  tf["tensorflow.RunGraphRequest"]["future_field"] = tf["tensorflow.RunGraphRequest"]["step_id"];
  tf["tensorflow.RunGraphRequest"]["future_field"]["number"] = 1001;
  MessageChecker checker(tf);
  checker.Check(RunGraphRequest::descriptor(), "tensorflow.RunGraphRequest");
  EXPECT_THAT(checker.problems(),
              ElementsAre(HasSubstr("step_id: number 2, TensorFlow's 99"),
                          HasSubstr("recv_key: label LABEL_REPEATED"),
                          HasSubstr("is_partial: type TYPE_BOOL"),
                          HasSubstr("request_id: TensorFlow has no such field"),
                          HasSubstr("dflow_cleanup_step_id: number 1001 is TensorFlow's field "
                                    "future_field")));
}

TEST(ProtoCompat, EnumsMatchTensorFlow) {
  const json tf = LoadTfFields()["enums"];
  for (const EnumDescriptor* e : OurEnums()) {
    if (!tf.contains(e->full_name())) {
      ADD_FAILURE() << "TensorFlow has no enum " << e->full_name();
      continue;
    }
    for (int i = 0; i < e->value_count(); ++i) {
      const std::string& name = e->value(i)->name();
      EXPECT_TRUE(tf[e->full_name()].contains(name)) << e->full_name() << "." << name;
      if (!tf[e->full_name()].contains(name)) continue;
      EXPECT_EQ(tf[e->full_name()][name], e->value(i)->number()) << e->full_name() << "." << name;
    }
  }
}

TEST(ProtoCompat, ServicesMatchTensorFlow) {
  const json tf = LoadTfFields()["services"];
  int services = 0;
  for (const FileDescriptor* f : OurFiles()) {
    for (int i = 0; i < f->service_count(); ++i, ++services) {
      const ServiceDescriptor* s = f->service(i);
      ASSERT_TRUE(tf.contains(s->full_name())) << "TensorFlow serves no " << s->full_name();
      const json& tf_methods = tf[s->full_name()];
      std::set<std::string> ours;
      for (int m = 0; m < s->method_count(); ++m) {
        const auto* method = s->method(m);
        ours.insert(method->name());
        const std::string where = s->full_name() + "/" + method->name();
        ASSERT_TRUE(tf_methods.contains(method->name())) << where;
        EXPECT_EQ(tf_methods[method->name()]["input"], method->input_type()->full_name()) << where;
        EXPECT_EQ(tf_methods[method->name()]["output"], method->output_type()->full_name())
            << where;
      }
      for (const auto& [name, unused] : tf_methods.items()) {
        EXPECT_TRUE(ours.count(name)) << s->full_name() << " lacks TensorFlow's " << name;
      }
    }
  }
  EXPECT_EQ(services, 2);
}

TEST(ProtoCompat, ParsesRunGraphRequestFromTensorFlow) {
  const std::string bytes = ReadHexFixture("tf_run_graph_request.hex");
  ASSERT_FALSE(bytes.empty());
  RunGraphRequest req;
  ASSERT_TRUE(req.ParseFromString(bytes));
  EXPECT_EQ(req.session_handle(), "sess_7f3a");
  EXPECT_TRUE(req.create_worker_session_called());
  EXPECT_EQ(req.graph_handle(), "0000000000000003");
  EXPECT_EQ(req.step_id(), 1234567890123);
  EXPECT_FALSE(req.exec_opts().record_costs());
  EXPECT_TRUE(req.exec_opts().record_timeline());
  EXPECT_TRUE(req.exec_opts().record_partition_graphs());
  ASSERT_EQ(req.send_size(), 2);
  const NamedTensorProto& x = req.send(0);
  EXPECT_EQ(x.name(), "x:0");
  EXPECT_EQ(x.tensor().dtype(), DT_FLOAT);
  ASSERT_EQ(x.tensor().tensor_shape().dim_size(), 2);
  EXPECT_EQ(x.tensor().tensor_shape().dim(0).size(), 2);
  EXPECT_EQ(x.tensor().tensor_shape().dim(1).size(), 2);
  std::vector<float> values(4);
  ASSERT_EQ(x.tensor().tensor_content().size(), sizeof(float) * values.size());
  std::memcpy(values.data(), x.tensor().tensor_content().data(), sizeof(float) * 4);
  EXPECT_THAT(values, ElementsAre(1.5f, -2.0f, 3.25f, 4.0f));
  const NamedTensorProto& n = req.send(1);
  EXPECT_EQ(n.name(), "n:0");
  EXPECT_EQ(n.tensor().dtype(), DT_INT64);
  EXPECT_THAT(n.tensor().int64_val(), ElementsAre(7, -8, 9));
  EXPECT_THAT(req.recv_key(),
              ElementsAre("/job:worker/replica:0/task:0/device:CPU:0;0000000000000001;"
                          "/job:ps/replica:0/task:0/device:CPU:0;y:0;0:0",
                          "loss:0"));
  EXPECT_TRUE(req.is_partial());
  EXPECT_TRUE(req.is_last_partial_run());
  EXPECT_TRUE(req.store_errors_in_response_body());
  EXPECT_EQ(req.request_id(), -42);
  // Nothing was unknown, and we write exactly what TensorFlow wrote.
  EXPECT_EQ(req.SerializeAsString(), bytes);
}

TEST(ProtoCompat, ParsesServerDefWithFieldsWeDoNotDeclare) {
  const std::string bytes = ReadHexFixture("tf_create_worker_session_request.hex");
  ASSERT_FALSE(bytes.empty());
  CreateWorkerSessionRequest req;
  ASSERT_TRUE(req.ParseFromString(bytes));
  EXPECT_EQ(req.session_handle(), "sess_7f3a");
  EXPECT_TRUE(req.isolate_session_state());
  EXPECT_EQ(req.master_task(), "/job:worker/replica:0/task:0");
  EXPECT_EQ(req.master_incarnation(), -3);

  const ServerDef& sd = req.server_def();
  ASSERT_EQ(sd.cluster().job_size(), 2);
  EXPECT_EQ(sd.cluster().job(0).name(), "ps");
  EXPECT_EQ(sd.cluster().job(0).tasks().at(0), "localhost:2222");
  EXPECT_EQ(sd.cluster().job(0).tasks().at(1), "localhost:2223");
  EXPECT_EQ(sd.cluster().job(1).name(), "worker");
  ASSERT_EQ(sd.cluster().job(1).tasks().size(), 1u);
  EXPECT_EQ(sd.cluster().job(1).tasks().at(3), "10.0.0.4:2222");
  EXPECT_EQ(sd.job_name(), "ps");
  EXPECT_EQ(sd.task_index(), 1);
  EXPECT_EQ(sd.protocol(), "grpc");
  EXPECT_EQ(sd.port(), 2223);

  const ConfigProto& cfg = sd.default_session_config();
  EXPECT_TRUE(cfg.allow_soft_placement());
  EXPECT_TRUE(cfg.graph_options().place_pruned_graph());
  ASSERT_EQ(cfg.cluster_def().job_size(), 1);
  EXPECT_EQ(cfg.cluster_def().job(0).tasks().at(0), "localhost:1111");

  ASSERT_EQ(req.cluster_device_attributes_size(), 1);
  const DeviceAttributes& dev = req.cluster_device_attributes(0);
  EXPECT_EQ(dev.name(), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(dev.device_type(), "CPU");
  EXPECT_EQ(dev.memory_limit(), int64_t{1} << 33);
  EXPECT_EQ(dev.incarnation(), 0xFEDCBA9876543210u);
  EXPECT_EQ(dev.locality().numa_node(), 1);
  // TensorFlow's undeclared fields (cluster_device_filters, rpc_options,
  // gpu_options.experimental, experimental) are kept, not dropped.
  EXPECT_EQ(req.ByteSizeLong(), bytes.size());
}

}  // namespace
}  // namespace tensorflow
