#include "ckptdoc/sources/deepspeed/catalog_json.h"

#include <memory>
#include <nlohmann/json.hpp>

namespace ckptdoc::deepspeed {

using nlohmann::json;

namespace {

json coord(int v) {
  return v >= 0 ? json(v) : json(nullptr);
}

json group_json(const Catalog& c, const GroupLayout& g) {
  json params = json::array();
  for (const auto& p : g.params) {
    json e{{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"offset", p.offset}};
    if (const auto it = c.lp_locations.find(p.name); it != c.lp_locations.end()) {
      e["lp_file"] = it->second.file;
      e["lp_key"] = it->second.key;
    } else {
      e["lp_file"] = nullptr;
      e["lp_key"] = nullptr;
    }
    if (c.autoep)  // an AutoEP expert param of one expert-parallel rank: its name in the files, its experts
      if (const auto it = c.autoep->params.find(p.name); it != c.autoep->params.end()) {
        const auto& L = c.autoep->layers[static_cast<size_t>(it->second.layer)];
        e["autoep"] = {{"param", it->second.name},
                       {"ep_rank", it->second.ep_rank},
                       {"experts", L.experts_of_rank[static_cast<size_t>(it->second.ep_rank)]}};
      }
    params.push_back(std::move(e));
  }
  json parts = json::array();
  for (const auto& rp : g.partitions) {
    json frags = json::array();
    for (const auto& f : rp.fragments) {
      frags.push_back({{"param", g.params[static_cast<size_t>(f.param)].name},
                       {"param_index", f.param},
                       {"param_offset", f.param_offset},
                       {"partition_offset", f.partition_offset},
                       {"numel", f.numel}});
    }
    parts.push_back({{"rank", rp.rank},
                     {"saved_numel", rp.saved_numel},
                     {"padding", rp.padding},
                     {"real_numel", rp.real_numel},
                     {"recorded_padding", rp.recorded_padding},
                     {"fragments", std::move(frags)}});
  }
  return {{"index", g.index},
          {"file_group", g.file_group},
          {"mp_rank", c.mp_rank},
          {"pp", c.pp_stage},
          {"tp", c.tp_rank},
          {"ep", coord(g.ep_rank)},
          {"expert", g.expert},
          {"numel", g.numel},
          {"padded_numel", g.padded_numel},
          {"partition_numel", g.partition_numel},
          {"params", std::move(params)},
          {"partitions", std::move(parts)}};
}

json topology_json(const Topology& t) {
  json moe = json::array();
  for (const auto& L : t.moe_layers)
    moe.push_back(
        {{"id", L.id}, {"prefix", L.prefix}, {"num_experts", L.num_experts}, {"ep_size", L.ep_size}});
  json stages = json::object();
  for (const auto& [layer, stage] : t.layer_stage) stages[std::to_string(layer)] = stage;
  return {{"mp_world_size", t.mp_world_size},
          {"pp", t.pp},
          {"tp", t.tp},
          {"ep", t.ep},
          {"pipeline", t.pipeline},
          {"layer_stage", stages},
          {"moe_layers", moe},
          {"legacy_expert_files", t.legacy_expert_files}};
}

json catalog_object(const Catalog& c, bool whole_job);

}  // namespace

std::string catalog_to_json(const Catalog& c, int indent) {
  return catalog_object(c, true).dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string checkpoint_to_json(const Checkpoint& ck, int indent) {
  json j = catalog_object(ck.catalog(), true);
  json slices = json::array();
  for (int m = 0; m < ck.slice_count(); ++m) {
    std::shared_ptr<const Checkpoint> s;
    try {
      s = ck.slice(m);
    } catch (const std::exception&) {
      slices.push_back(nullptr);  // unreadable: its problems are in the top-level list
      continue;
    }
    slices.push_back(catalog_object(s->catalog(), false));
  }
  j["slices"] = std::move(slices);
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

namespace {

json catalog_object(const Catalog& c, bool whole_job) {
  json j;
  j["kind"] = c.kind;
  j["save_dir"] = c.save_dir;
  j["tag"] = c.tag;
  j["tag_dir"] = c.tag_dir;
  // The neutral description the views print (catalog_describe.cpp), so a script reads what they show.
  j["description"] = c.description;
  j["optimizer_text"] = c.optimizer_text;
  j["partitioning_text"] = c.partitioning_text;
  j["optimizer_class"] = c.optimizer_class;
  j["writer_version"] = c.writer_version;
  j["file_count"] = c.file_count;
  j["file_bytes"] = c.file_bytes;
  json facts = json::array();
  for (const auto& f : c.facts) facts.push_back({{"label", f.label}, {"value", f.value}});
  j["facts"] = std::move(facts);
  j["capabilities"] = {{"weights_only", c.weights_only},
                       {"single_file", c.single_file},
                       {"convertible", c.convertible},
                       {"has_optimizer", c.has_optimizer},
                       {"module_weights_file", c.module_weights_file},
                       {"dp_independent", c.dp_independent},
                       {"lp_weights_elsewhere", c.lp_weights_elsewhere},
                       {"compares_lp_source", c.compares_lp_source}};
  j["zero_stage"] = c.zero_stage;
  j["lp_dtype"] = std::string(dtype_name(c.lp_dtype));
  j["optimizer_wrapper"] = std::string(wrapper_name(c.wrapper));
  j["dp_world_size"] = c.dp_world_size;
  j["mp_world_size"] = c.mp_world_size;
  j["optim_file_count"] = c.optim_file_count;
  j["partition_count"] = c.partition_count;
  j["ds_version"] = c.ds_version;
  j["mp_rank"] = c.mp_rank;
  j["pp"] = c.pp_stage;
  j["tp"] = c.tp_rank;
  if (whole_job) {
    j["parallel"] = topology_json(c.topology);
    json files = json::array();
    for (const auto& f : c.files) {
      files.push_back({{"path", f.path},
                       {"role", std::string(role_name(f.role))},
                       {"dp_rank", f.dp_rank},
                       {"mp_rank", f.mp_rank},
                       {"bytes", f.bytes},
                       {"bf16_prefix", f.bf16_prefix},
                       {"pp", coord(f.pp)},
                       {"tp", coord(f.tp)},
                       {"ep", coord(f.ep)},
                       {"layer", coord(f.layer)},
                       {"expert", coord(f.expert)}});
    }
    j["files"] = std::move(files);
  }
  json groups = json::array();
  for (const auto& g : c.groups) groups.push_back(group_json(c, g));
  j["groups"] = std::move(groups);
  j["buffer_names"] = c.buffer_names;
  json frozen = json::array();
  for (const auto& p : c.frozen_params)
    frozen.push_back({{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}});
  j["frozen_params"] = std::move(frozen);
  json shared = json::object();
  for (const auto& [alias, owner] : c.shared_params_in_order) shared[alias] = owner;
  j["shared_params"] = std::move(shared);
  j["module_keys"] = c.module_keys;
  j["global_steps"] = c.global_steps;
  j["skipped_steps"] = c.skipped_steps;
  j["global_samples"] = c.global_samples;
  j["optimizer_step"] = c.optimizer_step ? json(*c.optimizer_step) : json(nullptr);
  j["optimizer_state_keys"] = c.optimizer_state_keys;
  json ogroups = json::array();
  for (const auto& g : c.optimizer_groups)
    ogroups.push_back({{"step", g.step ? json(*g.step) : json(nullptr)},
                       {"has_state", g.has_state},
                       {"betas", {g.beta1, g.beta2}}});
  j["optimizer_groups"] = std::move(ogroups);
  j["optimizer_name_hint"] = c.optimizer_name_hint;
  j["loss_scaler"] = {
      {"present", c.loss_scaler.present},     {"dynamic", c.loss_scaler.dynamic},
      {"cur_scale", c.loss_scaler.cur_scale}, {"min_scale", c.loss_scaler.min_scale},
      {"cur_iter", c.loss_scaler.cur_iter},   {"last_overflow_iter", c.loss_scaler.last_overflow_iter}};
  j["lr_scheduler"] = c.lr_scheduler_summary;
  j["trainable_numel"] = c.trainable_numel();
  if (whole_job) {  // a slice's own problems are in the job's list (labelled)
    json problems = json::array();
    for (const auto& p : c.problems) {
      problems.push_back({{"code", p.code},
                          {"severity", std::string(model::severity_name(p.severity))},
                          {"message", p.message},
                          {"file", p.file},
                          {"ranks", p.ranks},
                          {"params", p.params},
                          {"pp", coord(p.pp)},
                          {"tp", coord(p.tp)}});
      if (!p.details.empty()) problems.back()["details"] = p.details;
    }
    j["problems"] = std::move(problems);
  }
  if (c.autoep) {
    json layers = json::array();
    for (const auto& L : c.autoep->layers)
      layers.push_back({{"id", L.id},
                        {"module_path", L.module_path},
                        {"expert_prefix", L.expert_prefix},
                        {"num_experts", L.num_experts},
                        {"experts_of_rank", L.experts_of_rank}});
    j["autoep"] = {{"ep_size", c.autoep->ep_size},
                   {"edp_size", c.autoep->edp_size},
                   {"ep_rank_of_dp", c.autoep->ep_rank_of_dp},
                   {"layers", std::move(layers)}};
  }
  if (c.universal) {
    const auto& u = *c.universal;
    json params = json::array();
    for (const auto& p : u.params)
      params.push_back({{"name", p.name},
                        {"optimizer_group", p.optimizer_group},
                        {"states", p.states},
                        {"step", p.step ? json(*p.step) : json(nullptr)},
                        {"cat_dim", p.cat_dim ? json(*p.cat_dim) : json(nullptr)}});
    j["kind"] = "deepspeed-universal";
    j["universal"] = {{"source_dp_world_size", u.source_dp_world_size},
                      {"iteration", u.iteration ? json(*u.iteration) : json(nullptr)},
                      {"has_universal_checkpoint_info", u.has_universal_checkpoint_info},
                      {"has_param_groups", u.has_param_groups},
                      {"has_step_files", u.has_step_files},
                      {"loads_with_iteration", u.loads_with_iteration()},
                      {"loads_with_step_files", u.loads_with_step_files()},
                      {"unexpected_folders", u.unexpected_folders},
                      {"module_entry_folders", u.module_entry_folders},
                      {"universal_checkpoint_version", u.version ? json(*u.version) : json(nullptr)},
                      {"zero3_step", u.zero3_step ? json(*u.zero3_step) : json(nullptr)},
                      {"params", std::move(params)}};
  }
  return j;
}

}  // namespace

}  // namespace ckptdoc::deepspeed
