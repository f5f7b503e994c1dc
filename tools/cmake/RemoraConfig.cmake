# find_package(Remora) -> the imported targets remora::remora (the library),
# remora::remora_dist (data parallelism) and remora::remora_train (the Trainer).
include(CMakeFindDependencyMacro)
# The Trainer's headers use nlohmann::json (Debian: nlohmann-json3-dev).
find_dependency(nlohmann_json 3)
include("${CMAKE_CURRENT_LIST_DIR}/RemoraTargets.cmake")
