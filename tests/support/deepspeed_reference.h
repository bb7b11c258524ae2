#pragma once
// Reading the DeepSpeed fixtures' checkpoint.reference.json / zero_to_fp32.tensors.json in tests, and
// hashing tensors the way those files do (sha256 of the raw little-endian bytes).
#include <QCryptographicHash>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckptdoc/format/value.h"
#include "test_support.h"

namespace ckptdoc::test {

inline const std::vector<std::string>& deepspeed_fixture_names() {
  static const std::vector<std::string> names{"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2",
                                              "zero3_fp16_ws2", "bf16opt_zero1_ws2"};
  return names;
}

// Throws (the test then fails) when the file is missing, unreadable or not a JSON object: an empty object
// would let a test compare nothing and pass.
inline QJsonObject read_json_file(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) throw std::runtime_error(path + ": cannot be read");
  // Python's json writes NaN/Infinity (e.g. stats of uninitialised ZeRO-3 padding); Qt rejects them.
  QByteArray text = f.readAll();
  text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(text, &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject())
    throw std::runtime_error(path + ": not a JSON object (" + err.errorString().toStdString() + ")");
  if (doc.object().isEmpty()) throw std::runtime_error(path + ": an empty JSON object");
  return doc.object();
}

inline QJsonObject fixture_reference(const std::string& name) {
  return read_json_file(deepspeed_fixture(name) + "/checkpoint.reference.json");
}

inline std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  return QCryptographicHash::hash(QByteArrayView(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<qsizetype>(bytes.size())),
                                  QCryptographicHash::Sha256)
      .toHex()
      .toStdString();
}

inline std::string tensor_sha256(const Tensor& t) {
  return sha256_hex(t.to_bytes());
}

inline std::string floats_sha256(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return sha256_hex(b);
}

}  // namespace ckptdoc::test
