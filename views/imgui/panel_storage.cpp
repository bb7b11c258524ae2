// The Storage tab: a self-reporting source's storage map (session::storage_picture: rows = files, items to
// scale of their bytes, coloured by key) and the table of its stored keys. Also the overview's summary of it.
#include <cstdio>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/session/storage_picture.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

ImU32 colour(uint32_t rgba) {
  return IM_COL32(rgba >> 24, (rgba >> 16) & 0xFF, (rgba >> 8) & 0xFF, rgba & 0xFF);
}

constexpr float kRowHeight = 20, kLabelWidth = 230;

void draw_map(View& v, const sources::StorageMap& map) {
  const auto pic = session::storage_picture(map, v.session.findings());
  const float height = kRowHeight * static_cast<float>(pic.rows.size()) + 4;
  ImGui::BeginChild("storage-map", ImVec2(0, std::min(height + 8, ImGui::GetContentRegionAvail().y * 0.45f)),
                    true);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(1.0f, ImGui::GetContentRegionAvail().x - kLabelWidth - 8);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 missing = IM_COL32(0xC6, 0x28, 0x28, 0xFF);
  for (size_t r = 0; r < pic.rows.size(); ++r) {
    const auto& row = pic.rows[r];
    const float y = origin.y + kRowHeight * static_cast<float>(r);
    const ImVec2 text = ImGui::CalcTextSize(row.label.c_str());
    dl->AddText(ImVec2(origin.x + kLabelWidth - 8 - text.x, y + (kRowHeight - text.y) * 0.5f),
                row.present ? ImGui::GetColorU32(ImGuiCol_Text) : missing, row.label.c_str());
    const float x0 = origin.x + kLabelWidth;
    const ImVec2 a(x0, y + 3),
        b(x0 + std::max(1.0f, static_cast<float>(row.extent) * width), y + kRowHeight - 3);
    dl->AddRectFilled(a, b,
                      row.present ? IM_COL32(0x3A, 0x3A, 0x3A, 0xFF) : IM_COL32(0x60, 0x18, 0x18, 0xFF));
    for (const auto& box : row.boxes) {
      const ImVec2 p(x0 + static_cast<float>(box.x0) * width, y + 3);
      const ImVec2 q(std::max(p.x + 1, x0 + static_cast<float>(box.x1) * width), y + kRowHeight - 3);
      dl->AddRectFilled(p, q, row.present ? colour(box.rgba) : (colour(box.rgba) & 0x40FFFFFFu));
      if (ImGui::IsMouseHoveringRect(p, q))
        ImGui::SetTooltip("%s", session::describe_stored_item(map, r, box.item).c_str());
    }
    if (!row.findings.empty())
      dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), missing, 0, 0, 2);
  }
  ImGui::Dummy(ImVec2(kLabelWidth + width, height));
  v.widgets.record("storage.map");
  ImGui::EndChild();
}

void draw_keys(const sources::StorageMap& map) {
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("stored-keys", 6, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("Key");
  ImGui::TableSetupColumn("Kind");
  ImGui::TableSetupColumn("Dtype");
  ImGui::TableSetupColumn("Shape");
  ImGui::TableSetupColumn("Chunks");
  ImGui::TableSetupColumn("Where (file, box, byte offset)", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableHeadersRow();
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(map.keys.size()));
  while (clipper.Step())
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const auto& k = map.keys[static_cast<size_t>(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k.key.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k.tensor ? "tensor" : "bytes");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k.dtype.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k.tensor ? shape_text(k.shape).c_str() : "");
      ImGui::TableNextColumn();
      ImGui::Text("%zu", k.chunks.size());
      ImGui::TableNextColumn();
      std::string where;
      for (const auto& c : k.chunks)
        where += (where.empty() ? "" : "; ") + (c.file.empty() ? std::string("(no storage item)") : c.file) +
                 (k.tensor ? " " + session::box_text(c.offsets, c.sizes) : "") + " @" +
                 std::to_string(c.offset) + " (" + human_bytes(c.length) + ")";
      ImGui::TextUnformatted(where.c_str());
    }
  ImGui::EndTable();
}

}  // namespace

void draw_storage_summary(const sources::StorageMap& map) {
  uint64_t bytes = 0;
  size_t absent = 0, tensors = 0;
  for (const auto& f : map.files) {
    bytes += f.size;
    absent += f.present ? 0 : 1;
  }
  for (const auto& k : map.keys) tensors += k.tensor ? 1 : 0;
  ImGui::TextUnformatted(map.path.c_str());
  ImGui::Text("Format %s: %zu tensors, %zu other items; %zu storage files, %s%s", map.format.c_str(), tensors,
              map.keys.size() - tensors, map.files.size(), human_bytes(bytes).c_str(),
              absent ? (", " + std::to_string(absent) + " not on disk").c_str() : "");
  ImGui::TextDisabled("The Storage tab shows its files and keys.");
}

void draw_storage(View& v) {
  const auto* map = v.session.storage_map();
  if (!map) {
    ImGui::TextDisabled(
        "No storage map: this tab shows the files and keys of a PyTorch Distributed Checkpoint (FSDP2, "
        "torchtitan), an Accelerate FSDP save_state folder or a Megatron-core iteration folder.");
    return;
  }
  ImGui::TextDisabled(
      "Rows: storage files, to scale of their bytes; colours: keys. A file not on disk is red.");
  draw_map(v, *map);
  draw_keys(*map);
}

bool save_storage_rows(const View& v, const std::string& file) {
  const auto* map = v.session.storage_map();
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (!f) return false;
  if (map) {
    const auto pic = session::storage_picture(*map, v.session.findings());
    for (size_t r = 0; r < pic.rows.size(); ++r)
      for (const auto& box : pic.rows[r].boxes) {
        const auto& item = map->files[r].items[box.item];
        std::fprintf(f, "%s\t%d\t%s\t%llu\t%llu\n", pic.rows[r].label.c_str(), pic.rows[r].present ? 1 : 0,
                     item.key.c_str(), static_cast<unsigned long long>(item.offset),
                     static_cast<unsigned long long>(item.length));
      }
  }
  return std::fclose(f) == 0;
}

}  // namespace ckptdoc::imgui_view
