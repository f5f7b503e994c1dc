// Installed as <remora/remora.h>: the umbrella header.
#pragma once
#include "core/remora.h"
