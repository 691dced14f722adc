// ResourceHandle: the value held by a DT_RESOURCE tensor, naming a resource
// (variable, queue, ...) in one device's ResourceMgr.
#ifndef DFLOW_FRAMEWORK_RESOURCE_HANDLE_H_
#define DFLOW_FRAMEWORK_RESOURCE_HANDLE_H_

#include <cstdint>
#include <string>

#include "dflow/proto/resource_handle.pb.h"

namespace dflow {

struct ResourceHandle {
  std::string device;
  std::string container;
  std::string name;
  uint64_t hash_code = 0;  // Identifies the resource's C++ type.
  std::string maybe_type_name;

  void AsProto(tensorflow::ResourceHandleProto* p) const {
    p->set_device(device);
    p->set_container(container);
    p->set_name(name);
    p->set_hash_code(hash_code);
    p->set_maybe_type_name(maybe_type_name);
  }
  void FromProto(const tensorflow::ResourceHandleProto& p) {
    device = p.device();
    container = p.container();
    name = p.name();
    hash_code = p.hash_code();
    maybe_type_name = p.maybe_type_name();
  }
  std::string DebugString() const {
    return device + ";" + container + ";" + name + ";" + maybe_type_name;
  }
  friend bool operator==(const ResourceHandle& a, const ResourceHandle& b) {
    return a.device == b.device && a.container == b.container && a.name == b.name &&
           a.hash_code == b.hash_code;
  }
};

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_RESOURCE_HANDLE_H_
