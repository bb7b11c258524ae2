#pragma once
// Precompiled for every Qt Test target (tests/CMakeLists.txt): Qt Test and the JSON classes are most of a
// test file's compile time, and about 170 test files include them. Only headers that every target may see
// belong here.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_support.h"
