#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct DtypeName {
    Dtype dtype;
    const char* name;
    size_t size;
};

constexpr DtypeName kDtypes[] = {
    {Dtype::f32, "F32", 4}, {Dtype::f16, "F16", 2},      {Dtype::bf16, "BF16", 2}, {Dtype::f64, "F64", 8},
    {Dtype::i64, "I64", 8}, {Dtype::i32, "I32", 4},      {Dtype::i16, "I16", 2},   {Dtype::i8, "I8", 1},
    {Dtype::u8, "U8", 1},   {Dtype::boolean, "BOOL", 1},
};

// Largest header the format allows (the reference implementation's limit): a bigger value is a
// corrupted length, not a header.
constexpr uint64_t kMaxHeader = 100u << 20;

}  // namespace

Dtype dtype_from_safetensors(const std::string& name) {
    for (const auto& d : kDtypes)
        if (name == d.name) return d.dtype;
    throw std::runtime_error("unsupported dtype \"" + name + "\"");
}

std::string dtype_to_safetensors(Dtype dt) {
    for (const auto& d : kDtypes)
        if (d.dtype == dt) return d.name;
    throw std::logic_error("dtype without a safetensors name");
}

size_t dtype_size(Dtype dt) {
    for (const auto& d : kDtypes)
        if (d.dtype == dt) return d.size;
    throw std::logic_error("dtype without a size");
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    auto fail = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::string("cannot open: ") + strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        fail(std::string("cannot stat: ") + strerror(errno));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ < 8) {
        ::close(fd);
        fail("truncated: " + std::to_string(size_) + " bytes, less than the 8-byte header length");
    }
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map_ == MAP_FAILED) {
        map_ = nullptr;
        fail(std::string("cannot map: ") + strerror(errno));
    }
    try {
        const auto* bytes = static_cast<const uint8_t*>(map_);
        uint64_t header_len = 0;
        for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
        if (header_len > kMaxHeader || header_len > size_ - 8)
            fail("header size " + std::to_string(header_len) + " exceeds the file (" + std::to_string(size_) +
                 " bytes): truncated or not a safetensors file");
        json header;
        try {
            header = json::parse(bytes + 8, bytes + 8 + header_len);
        } catch (const json::parse_error& e) {
            fail(std::string("header is not valid JSON: ") + e.what());
        }
        if (!header.is_object()) fail("header is not a JSON object");
        const uint8_t* data = bytes + 8 + header_len;
        const size_t data_size = size_ - 8 - header_len;
        std::vector<std::pair<size_t, size_t>> spans;
        for (auto it = header.begin(); it != header.end(); ++it) {
            const std::string& name = it.key();
            if (name == "__metadata__") {
                if (it->is_object())
                    for (auto m = it->begin(); m != it->end(); ++m)
                        if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
                continue;
            }
            const json& t = *it;
            if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
                fail("tensor " + name + ": entry needs dtype, shape and data_offsets");
            TensorView v;
            v.name = name;
            try {
                v.dtype = dtype_from_safetensors(t["dtype"].get<std::string>());
                v.shape = t["shape"].get<std::vector<int64_t>>();
                auto off = t["data_offsets"].get<std::vector<uint64_t>>();
                if (off.size() != 2) throw std::runtime_error("data_offsets must be [begin, end]");
                if (off[0] > off[1] || off[1] > data_size)
                    throw std::runtime_error("data_offsets [" + std::to_string(off[0]) + ", " + std::to_string(off[1]) +
                                             "] lie outside the " + std::to_string(data_size) +
                                             " data bytes (truncated file?)");
                for (auto s : v.shape)
                    if (s < 0) throw std::runtime_error("negative dimension in shape");
                v.data = data + off[0];
                v.nbytes = off[1] - off[0];
                size_t want = static_cast<size_t>(v.numel()) * dtype_size(v.dtype);
                if (want != v.nbytes)
                    throw std::runtime_error("holds " + std::to_string(v.nbytes) + " bytes, its shape and dtype need " +
                                             std::to_string(want));
                spans.emplace_back(off[0], off[1]);
            } catch (const json::exception& e) {
                fail("tensor " + name + ": malformed entry: " + e.what());
            } catch (const std::runtime_error& e) {
                fail("tensor " + name + ": " + e.what());
            }
            tensors_.emplace(name, std::move(v));
        }
        std::sort(spans.begin(), spans.end());
        for (size_t i = 1; i < spans.size(); ++i)
            if (spans[i].first < spans[i - 1].second) fail("tensors overlap in the data section");
    } catch (...) {
        ::munmap(map_, size_);
        map_ = nullptr;
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (map_) ::munmap(map_, size_);
}

Checkpoint::Checkpoint(const std::string& model_dir) : dir_(model_dir) {
    fs::path dir(model_dir);
    fs::path index = dir / "model.safetensors.index.json";
    fs::path single = dir / "model.safetensors";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw std::runtime_error(model_dir + ": not a directory");
    if (fs::exists(index, ec)) {
        json j;
        try {
            j = json::parse(read_file(index.string()));
        } catch (const json::parse_error& e) {
            throw std::runtime_error(index.string() + ": not valid JSON: " + e.what());
        }
        if (!j.contains("weight_map") || !j["weight_map"].is_object())
            throw std::runtime_error(index.string() + ": no \"weight_map\" object");
        std::map<std::string, size_t> file_of;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it->is_string())
                throw std::runtime_error(index.string() + ": weight_map entry " + it.key() + " is not a file name");
            std::string shard = it->get<std::string>();
            if (!file_of.count(shard)) {
                fs::path sp = dir / shard;
                if (!fs::exists(sp, ec))
                    throw std::runtime_error(model_dir + ": shard " + shard + " listed in the index is missing");
                file_of[shard] = files_.size();
                files_.push_back(std::make_unique<SafetensorsFile>(sp.string()));
            }
            const auto& tensors = files_[file_of[shard]]->tensors();
            auto t = tensors.find(it.key());
            if (t == tensors.end())
                throw std::runtime_error(model_dir + ": the index puts " + it.key() + " in " + shard +
                                         ", which lacks it");
            index_[it.key()] = &t->second;
        }
    } else if (fs::exists(single, ec)) {
        files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
        for (const auto& [name, view] : files_.back()->tensors()) index_[name] = &view;
    } else {
        throw std::runtime_error(model_dir + ": no model.safetensors or model.safetensors.index.json");
    }
}

const TensorView* Checkpoint::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::at(const std::string& name) const {
    if (auto* v = find(name)) return *v;
    throw std::runtime_error("tensor " + name + " is missing from " + dir_);
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> out;
    for (const auto& [n, _] : index_) out.push_back(n);
    return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    std::vector<const TensorBlob*> sorted;
    for (const auto& t : tensors) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    size_t offset = 0;
    for (const auto* t : sorted) {
        int64_t n = 1;
        for (auto s : t->shape) n *= s;
        if (static_cast<size_t>(n) * dtype_size(t->dtype) != t->nbytes)
            throw std::runtime_error("write_safetensors: tensor " + t->name + " has " + std::to_string(t->nbytes) +
                                     " bytes for its shape and dtype");
        header[t->name] = {{"dtype", dtype_to_safetensors(t->dtype)},
                           {"shape", t->shape},
                           {"data_offsets", {offset, offset + t->nbytes}}};
        offset += t->nbytes;
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as the reference writer does
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>((static_cast<uint64_t>(h.size()) >> (8 * i)) & 0xff);
    AtomicFileWriter w(path);
    w.write(len, 8);
    w.write(h.data(), h.size());
    for (const auto* t : sorted) w.write(t->data, t->nbytes);
    w.commit();
}

}  // namespace kz
