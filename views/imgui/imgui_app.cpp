#include "imgui_app.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "imgui_panels.h"

namespace ckptdoc::imgui_view {

namespace {

struct Args {
  std::string path;
  std::string screenshot;
  int frames = 3;
  int width = 1280, height = 800;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (s == "--screenshot") {
      const char* v = value();
      if (!v) return false;
      a.screenshot = v;
    } else if (s == "--frames") {
      const char* v = value();
      if (!v) return false;
      a.frames = std::max(1, std::atoi(v));
    } else if (s == "--size") {
      const char* v = value();
      if (!v || std::sscanf(v, "%dx%d", &a.width, &a.height) != 2) return false;
    } else if (s.rfind("--", 0) == 0 || !a.path.empty()) {
      return false;
    } else {
      a.path = s;
    }
  }
  return true;
}

bool save_framebuffer(const std::string& file, int w, int h) {
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * static_cast<size_t>(h) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> flipped(pixels.size());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h; ++y)
    std::memcpy(flipped.data() + static_cast<size_t>(y) * row, pixels.data() + static_cast<size_t>(h - 1 - y) * row, row);
  return stbi_write_png(file.c_str(), w, h, 4, flipped.data(), static_cast<int>(row)) != 0;
}

void start_analysis(ViewState& s) {
  auto ckpt = s.checkpoint;
  s.worker = std::thread([&s, ckpt] {
    try {
      analysis::DiagnoseOptions o;
      s.report = analysis::diagnose(*ckpt, o, &s.progress);
    } catch (const std::exception& e) {
      s.analysis_error = e.what();
    }
    s.done.store(true);
  });
}

void draw_frame(ViewState& s, int w, int h) {
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(static_cast<float>(w), static_cast<float>(h)));
  ImGui::Begin("ckptdoc", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoBringToFrontOnFocus);
  draw_header(s);
  ImGui::Separator();
  if (s.checkpoint) {
    const float avail = ImGui::GetContentRegionAvail().y;
    ImGui::BeginChild("findings", ImVec2(0, avail * 0.28f), true);
    ImGui::TextDisabled("FINDINGS");
    draw_findings(s);
    ImGui::EndChild();
    ImGui::BeginChild("params", ImVec2(0, avail * 0.38f), true);
    ImGui::TextDisabled("PARAMS");
    ImGui::SameLine();
    draw_param_table(s);
    ImGui::EndChild();
    ImGui::BeginChild("layout", ImVec2(0, 0), true);
    ImGui::TextDisabled("PARTITION LAYOUT");
    ImGui::SameLine();
    draw_layout(s);
    ImGui::EndChild();
  }
  ImGui::End();
}

}  // namespace

int run(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr, "usage: ckptdoc-imgui PATH [--screenshot FILE] [--frames N] [--size WxH]\n");
    return 2;
  }
  ViewState s;
  s.path = args.path;
  if (!args.path.empty()) {
    try {
      s.checkpoint = deepspeed::Checkpoint::open(args.path);
    } catch (const std::exception& e) {
      s.open_error = e.what();
    }
  } else {
    s.open_error = "no checkpoint given";
  }
  if (s.checkpoint)
    start_analysis(s);
  else
    s.done.store(true);

  if (!glfwInit()) {
    std::fprintf(stderr, "ckptdoc-imgui: cannot initialise GLFW (no display?)\n");
    s.progress.cancel();
    if (s.worker.joinable()) s.worker.join();
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(args.width, args.height, "ckptdoc (ImGui)", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "ckptdoc-imgui: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    s.progress.cancel();
    if (s.worker.joinable()) s.worker.join();
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");

  int rc = 0;
  int frames_after_done = 0;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    int w = 0, h = 0;
    glfwGetFramebufferSize(window, &w, &h);
    draw_frame(s, w, h);
    ImGui::Render();
    glViewport(0, 0, w, h);
    glClearColor(0.1f, 0.1f, 0.12f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!args.screenshot.empty() && s.done.load()) {
      if (s.report && s.selected_param < 0 && !s.report->params.empty()) {
        // Select the worst param so the layout shows a highlight.
        const analysis::ParamReport* worst = &s.report->params.front();
        for (const auto& p : s.report->params)
          if (p.severity_score() > worst->severity_score()) worst = &p;
        if (auto where = s.checkpoint->catalog().find_param(worst->name)) {
          s.group = where->first;
          s.selected_param = where->second;
          s.selected_name = worst->name;
        }
      }
      if (++frames_after_done >= args.frames) {
        rc = save_framebuffer(args.screenshot, w, h) ? 0 : 1;
        std::fprintf(stderr, "%s %s\n", rc == 0 ? "screenshot saved:" : "cannot save screenshot:",
                     args.screenshot.c_str());
        glfwSetWindowShouldClose(window, 1);
      }
    }
    glfwSwapBuffers(window);
    if (!args.screenshot.empty() && frame > 20000) {  // analysis never ended: give up
      rc = 1;
      break;
    }
  }
  s.progress.cancel();
  if (s.worker.joinable()) s.worker.join();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace ckptdoc::imgui_view
