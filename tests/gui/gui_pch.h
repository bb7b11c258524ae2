#pragma once
// Precompiled for the GUI test targets, which build with Qt Widgets (tests/CMakeLists.txt).
#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QTableView>

#include "test_pch.h"
