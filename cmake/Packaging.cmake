# Install rules and the Debian package (`cpack -G DEB`, scripts/package.sh). Included after app/ and views/, so the
# targets exist here and app/CMakeLists.txt needs no install code. Layout under the prefix (/usr in the package):
#   bin/                   ckptdoc, ckptdoc-gui, ckptdoc-imgui (the CLI runs `ckptdoc-gui` from its own folder)
#   lib/ckptdoc/           the MPI plugin, which the CLI loads from $ORIGIN/../lib/ckptdoc (not a system library)
#   share/applications/    the desktop entry; share/icons/hicolor/scalable/apps/ its icon
#   share/ckptdoc/python/  ckptdoc_hook.py, put on PYTHONPATH by the training script (any python, venvs too)
include(GNUInstallDirs)

foreach(exe IN ITEMS ckptdoc ckptdoc-gui ckptdoc-imgui)
  if(TARGET ${exe})
    install(TARGETS ${exe} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
if(TARGET ckptdoc_mpi)
  install(TARGETS ckptdoc_mpi LIBRARY DESTINATION lib/ckptdoc)  # fixed "lib": the CLI's search path names it
endif()
if(TARGET ckptdoc-gui)  # the entry starts ckptdoc-gui: without it there is nothing to launch
  install(FILES ${PROJECT_SOURCE_DIR}/resources/ckptdoc.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/ckptdoc.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/resources/python/ckptdoc_hook.py DESTINATION ${CMAKE_INSTALL_DATADIR}/ckptdoc/python)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ckptdoc)
set(CPACK_PACKAGE_VENDOR ckptdoc)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "inspect and repair deep-learning training checkpoints")
set(CPACK_PACKAGE_DESCRIPTION "ckptdoc reads DeepSpeed ZeRO checkpoints, PyTorch Distributed Checkpoints
(FSDP2, torchtitan, Accelerate), Megatron-core checkpoints, torch.save files and
safetensors without Python and without running code from a file. It names
problems such as stale fp32 masters in plain words, and repairs, converts or
exports the checkpoint into a new, verified folder. The package holds the CLI
(ckptdoc), the Qt desktop app (ckptdoc-gui), the ImGui view (ckptdoc-imgui)
and the Python hook for live training runs
(/usr/share/ckptdoc/python/ckptdoc_hook.py).")  # lines under 80: Debian policy
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "ckptdoc maintainers <maintainers@users.noreply.a-seed-b8103b09.example>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # ckptdoc_<version>_<arch>.deb
# Depends from the binaries' NEEDED entries (dpkg-shlibdeps): right for whichever optional parts this build has.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, python3-numpy, python3-h5py")  # what the hook imports
set(CPACK_STRIP_FILES ON)
include(CPack)
