# SPDX-License-Identifier: BSD-3-Clause
# find_package(Remora) -> the imported targets remora::remora (the library),
# remora::remora_dist (data parallelism), remora::remora_train (the Trainer) and
# remora::remora_text (tokenizers).
include("${CMAKE_CURRENT_LIST_DIR}/RemoraTargets.cmake")
