#include "imgui_app.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ckptdoc/session/frame_stats.h"
#include "ckptdoc/session/request_field_labels.h"
#include "script.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

struct Args {
  std::string path, script, screenshot, tab = "overview", shade, param;
  int frames = 5;
  int width = 1280, height = 800;
  int bench = 0;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (s == "--script" || s == "--screenshot" || s == "--tab" || s == "--shade" || s == "--param" ||
        s == "--frames" || s == "--size" || s == "--bench") {
      if (!(v = value())) return false;
    }
    if (s == "--script")
      a.script = v;
    else if (s == "--screenshot")
      a.screenshot = v;
    else if (s == "--tab")
      a.tab = v;
    else if (s == "--shade")
      a.shade = v;
    else if (s == "--param")
      a.param = v;
    else if (s == "--frames")
      a.frames = std::max(1, std::atoi(v));
    else if (s == "--bench")
      a.bench = std::max(1, std::atoi(v));
    else if (s == "--size") {
      if (std::sscanf(v, "%dx%d", &a.width, &a.height) != 2) return false;
    } else if (s.rfind("--", 0) == 0 || !a.path.empty()) {
      return false;
    } else {
      a.path = s;
    }
  }
  return true;
}

// --screenshot as a script: wait for the analysis, show the worst param, let the pictures settle, save.
std::string screenshot_script(const Args& a) {
  std::string s;
  if (!a.path.empty())
    s += "wait analysed 600\nselect " + (a.param.empty() ? std::string("@worst") : a.param) + "\n";
  s += "tab " + a.tab + "\n";
  if (!a.shade.empty()) s += "shade " + a.shade + "\n";
  if (!a.path.empty() && a.tab == "params") s += "wait density 120\n";
  s += "frames 2\nwait idle 120\nframes " + std::to_string(a.frames) + "\nscreenshot " + a.screenshot +
       "\nquit\n";
  return s;
}

View* g_view = nullptr;  // for GLFW's drop callback, which carries no user data we own

void on_drop(GLFWwindow*, int count, const char** paths) {
  if (g_view && count > 0) open_path(*g_view, paths[0]);
}

// DejaVu Sans when the system has it (core's messages use "…", "—", "Δ", "≈"), else ImGui's ASCII font.
bool load_fonts() {
  const char* path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (!std::filesystem::exists(path)) return false;
  static const ImWchar ranges[] = {0x0020, 0x00FF, 0x0370, 0x03FF, 0x2010, 0x205E, 0x2190, 0x21FF,
                                   0x2200, 0x22FF, 0x25A0, 0x25FF, 0x2713, 0x2718, 0};
  return ImGui::GetIO().Fonts->AddFontFromFileTTF(path, 15.0f, nullptr, ranges) != nullptr;
}

void draw_frame(View& v, int w, int h) {
  follow_analysis(v);
  v.layout.legend_drawn.clear();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(static_cast<float>(w), static_cast<float>(h)));
  ImGui::Begin("ckptdoc", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_MenuBar |
                   ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoBackground);  // glClear paints it
  draw_header(v);
  if (ImGui::BeginTabBar("tabs")) {
    const Tab tabs[] = {Tab::Overview, Tab::Layout, Tab::Params, Tab::Diff, Tab::Storage};
    const char* names[] = {"Overview", "Partition layout", "Params", "Diff", "Storage"};
    for (int i = 0; i < 5; ++i) {
      ImGuiTabItemFlags flags = 0;
      if (v.tab_requested && v.tab == tabs[i]) flags |= ImGuiTabItemFlags_SetSelected;
      if (ImGui::BeginTabItem(names[i], nullptr, flags)) {
        if (!v.tab_requested) v.tab = tabs[i];
        if (tabs[i] == Tab::Overview) draw_overview(v);
        if (tabs[i] == Tab::Layout) draw_layout(v);
        if (tabs[i] == Tab::Params) draw_params(v);
        if (tabs[i] == Tab::Diff) draw_diff(v);
        if (tabs[i] == Tab::Storage) draw_storage(v);
        ImGui::EndTabItem();
      }
    }
    v.tab_requested = false;
    ImGui::EndTabBar();
  }
  ImGui::End();
  draw_repair_window(v);
  draw_export_window(v);
  draw_convert_window(v);
  draw_open_window(v);
  draw_jobs(v);
}

// --bench: after the analysis, N frames of each scenario, each timed to the end of its rendering (glFinish).
struct Bench {
  int frames = 0;
  int scenario = -1;  // -1 waiting for the analysis
  int done = 0;
  std::vector<double> times, cpu;
  static constexpr const char* kNames[] = {"overview", "layout", "layout-panning", "params",
                                           "params-scrolling"};
  bool finished = false;

  void before(View& v) {
    if (scenario < 0) {
      if (v.session.is_open() && (!v.session.report() || v.session.analysing())) return;
      if (!v.session.is_open() && v.session.opening()) return;
      scenario = 0;
      v.tab = Tab::Overview;
      v.tab_requested = true;
      if (v.session.report()) select_param(v, v.session.worst_param());
    }
    if (scenario == 2) {  // pan the map every frame: the raster is recomputed each time
      v.layout.auto_fit = false;
      v.layout.geometry.first_element +=
          v.layout.geometry.elements_per_pixel * 3 * ((done / 20) % 2 ? -1 : 1);
    }
    v.scroll_table = scenario == 4;  // the params table scrolls by a few rows each frame
  }
  // ms: the whole frame (to the end of llvmpipe's rendering); cpu_ms: building it (ImGui, pictures, uploads).
  void after(View& v, double ms, double cpu_ms) {
    if (scenario < 0 || finished) return;
    times.push_back(ms);
    cpu.push_back(cpu_ms);
    if (++done < frames) return;
    const session::FrameStats s = session::frame_stats(times), c = session::frame_stats(cpu);
    std::printf(
        "frames %-16s n=%d median=%6.2f ms p95=%6.2f ms max=%6.2f ms | building: median=%6.2f ms p95=%6.2f "
        "ms\n",
        kNames[scenario], frames, s.median, s.p95, s.max, c.median, c.p95);
    std::fflush(stdout);
    times.clear();
    cpu.clear();
    done = 0;
    ++scenario;
    if (!v.session.is_open() || scenario == 5) {
      finished = true;
      return;
    }
    v.tab = scenario <= 2 ? (scenario == 0 ? Tab::Overview : Tab::Layout) : Tab::Params;
    v.tab_requested = true;
  }
};

}  // namespace

int run(int argc, char** argv) {
  set_request_field_namer(&session::request_field_label);  // refusals name our controls, not CLI flags
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(
        stderr,
        "usage: ckptdoc-imgui [PATH] [--script FILE] [--screenshot FILE [--tab "
        "overview|layout|params|diff|storage] "
        "[--shade param|exact|nonfinite|moments] [--param NAME] [--frames N]] [--size WxH] [--bench N]\n");
    return 2;
  }
  std::optional<Script> script;
  std::string error;
  if (!args.script.empty())
    script = Script::load(args.script, &error);
  else if (!args.screenshot.empty())
    script = Script::parse(screenshot_script(args), "--screenshot", &error);
  if ((!args.script.empty() || !args.screenshot.empty()) && !script) {
    std::fprintf(stderr, "ckptdoc-imgui: %s\n", error.c_str());
    return 2;
  }

  if (!glfwInit()) {
    std::fprintf(stderr, "ckptdoc-imgui: cannot initialise GLFW (no display?)\n");
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(args.width, args.height, "ckptdoc (ImGui)", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "ckptdoc-imgui: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(args.bench || script ? 0 : 1);
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 3;
  ImGui::GetStyle().Colors[ImGuiCol_WindowBg].w = 1.0f;  // opaque: the clear colour is the background
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");

  int rc = 0;
  {
    auto view = std::make_unique<View>();
    View& v = *view;
    v.fonts_unicode = load_fonts();
    v.recent.load();
    v.session.set_wake([] { glfwPostEmptyEvent(); });  // thread-safe: wakes glfwWaitEvents*
    g_view = &v;
    glfwSetDropCallback(window, on_drop);
    if (!args.path.empty()) open_path(v, args.path);

    Bench bench;
    bench.frames = args.bench;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    while (!glfwWindowShouldClose(window) && !v.quit) {
      const bool busy = !v.session.jobs().empty() || script || args.bench;
      if (busy)
        glfwPollEvents();
      else
        glfwWaitEventsTimeout(0.25);  // idle: no frames, no CPU (a remote node's X connection stays quiet)
      const auto frame_start = clock::now();
      v.session.poll();
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      ImGuiIO& io = ImGui::GetIO();
      if (script) script->before_frame(v, io, std::chrono::duration<double>(frame_start - t0).count());
      if (args.bench) bench.before(v);
      ImGui::NewFrame();
      int w = 0, h = 0;
      glfwGetFramebufferSize(window, &w, &h);
      draw_frame(v, w, h);
      ImGui::Render();
      const auto built = clock::now();
      glViewport(0, 0, w, h);
      const ImVec4 bg = ImGui::GetStyleColorVec4(ImGuiCol_WindowBg);
      glClearColor(bg.x, bg.y, bg.z, 1);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (script) script->after_render(w, h);
      glfwSwapBuffers(window);
      if (args.bench) {
        glFinish();
        bench.after(v, std::chrono::duration<double, std::milli>(clock::now() - frame_start).count(),
                    std::chrono::duration<double, std::milli>(built - frame_start).count());
        if (bench.finished) break;
      }
      if (script && script->finished()) {
        rc = script->exit_code();
        break;
      }
    }
    g_view = nullptr;
  }  // the session (and its workers) end before the GL context
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace ckptdoc::imgui_view
