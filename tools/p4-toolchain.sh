#!/bin/bash
# Build and install the P4 toolchain that hina's P4 targets need (root, Debian 12):
#   BMv2 target: p4c with its BMv2 back end, PI with P4Runtime, BMv2 (simple_switch_grpc with its
#     Thrift server, which the controller's register resets use) and Python's `thrift` module,
#     installed into /usr/local.  About an hour on 2 cores.
#   --tofino: p4c with Intel's open-source Tofino back end (Tofino 1 and 2, TNA, T2NA and v1model
#     programs), into its own prefix (default /opt/p4c-tofino; `make tofino` looks there).  About
#     two more hours on 2 cores.
#   --testgen: p4c's test generator p4testgen (backends/p4tools, with Z3 from PyPI's wheel) beside
#     each compiler built: its bmv2 target in PREFIX/bin, and with --tofino its tofino target in
#     TOFINO_PREFIX/bin (`make testgen` looks in both).  A compiler already installed without it is
#     rebuilt in place, its objects kept.
#
# Usage: tools/p4-toolchain.sh [options] [GITDIR ...]
#   GITDIR       a local git copy (bare or not) of one of the repositories below, recognised by the
#                name its path ends in (.../p4c, .../p4c/.git, .../p4lang+p4c/repo).  Every
#                repository not given is cloned from GitHub, which needs internet.
#   --tofino     also build the Tofino compiler
#   --testgen    also build p4testgen for each compiler built (bmv2; with --tofino, tofino too)
#   --no-bmv2    skip the BMv2 target (with --tofino: the Tofino compiler alone)
#   --fast-bmv2 PREFIX
#                also build an -O3 BMv2 without logging into PREFIX (off PATH), to time the
#                emulator against the fastest BMv2
#   --prefix P           where the BMv2 target goes (default /usr/local)
#   --tofino-prefix P    where the Tofino compiler goes (default /opt/p4c-tofino)
#   --work DIR           sources and builds (default ~/.cache/p4-toolchain); logs in DIR/log
#   --jobs N             parallel compile jobs (default: the CPU count; a Tofino job needs ~4.5 GB)
#   -h, --help           this text
#
# Repositories (name: upstream, the version built):
#   p4c: p4lang/p4c v1.2.5.16          behavioral-model: p4lang/behavioral-model 1.15.5
#   PI: p4lang/PI (main)               p4runtime: p4lang/p4runtime (the commits PI and p4c pin)
#   gnmi, uthash, googletest: PI's submodules, at the commits PI pins
#   abseil-cpp: abseil/abseil-cpp 20240722.1    protobuf: protocolbuffers/protobuf v25.3
#   spdlog: gabime/spdlog v1.8.3 (--tofino only)   inja: pantor/inja (the commit p4c pins; --testgen only)
#
# A step whose result is installed (the tool reports the wanted version) is skipped, so the script
# can be re-run after a failure.  Distribution packages exist for p4c and BMv2 too (docs/p4.md says
# which, and when to prefer them).
set -euo pipefail

P4C_TAG=v1.2.5.16 BMV2_TAG=1.15.5 ABSL_TAG=20240722.1 PROTOBUF_TAG=v25.3 SPDLOG_TAG=v1.8.3
# the Tofino back end needs 4.8.14 <= Z3 < 4.12 (Debian 12 has 4.8.12): the PyPI wheel's library
Z3_WHEEL=z3-solver==4.11.2.0
declare -A UPSTREAM=(
  [p4c]=p4lang/p4c [behavioral-model]=p4lang/behavioral-model [PI]=p4lang/PI [p4runtime]=p4lang/p4runtime
  [gnmi]=openconfig/gnmi [uthash]=troydhanson/uthash [googletest]=google/googletest
  [abseil-cpp]=abseil/abseil-cpp [protobuf]=protocolbuffers/protobuf [spdlog]=gabime/spdlog
  [inja]=pantor/inja
)
WORK=${P4_TOOLCHAIN_WORK:-$HOME/.cache/p4-toolchain}
JOBS=$(nproc) PREFIX=/usr/local TOFINO_PREFIX=/opt/p4c-tofino
BMV2=1 TOFINO=0 TESTGEN=0 FAST_PREFIX=
declare -A SRC=()

die() { echo "p4-toolchain: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
while (($#)); do
  case $1 in
    --tofino) TOFINO=1; shift ;;
    --testgen) TESTGEN=1; shift ;;
    --no-bmv2) BMV2=0; shift ;;
    --fast-bmv2) FAST_PREFIX=${2:?--fast-bmv2 needs a prefix}; shift 2 ;;
    --prefix) PREFIX=${2:?--prefix needs a directory}; shift 2 ;;
    --tofino-prefix) TOFINO_PREFIX=${2:?--tofino-prefix needs a directory}; shift 2 ;;
    --work) WORK=${2:?--work needs a directory}; shift 2 ;;
    --jobs) JOBS=${2:?--jobs needs a number}; [[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs: not a positive integer: $JOBS"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [[ -d $1 ]] || die "not a directory: $1"
       d=${1%/}; case $(basename "$d") in repo|.git) d=$(dirname "$d") ;; esac
       n=$(basename "$d" | sed 's/.*+//')
       [[ -n ${UPSTREAM[$n]:-} ]] || die "$1: not one of the repositories (${!UPSTREAM[*]})"
       SRC[$n]=$1; shift ;;
  esac
done
((BMV2 || TOFINO)) || die "nothing to build: --no-bmv2 without --tofino"
[[ $(id -u) == 0 ]] || die "run as root (it installs Debian packages and into $PREFIX)"
mkdir -p "$WORK/log" "$WORK/git"
T0=$SECONDS

step() {  # step NAME COMMAND...: run COMMAND, its output in the log, one line of progress here
  local name=$1 rc; shift
  printf '[%3d min] %s ... ' $(((SECONDS - T0) / 60)) "$name"
  set +e; ( set -e; "$@" ) >"$WORK/log/$name.log" 2>&1; rc=$?; set -e
  if ((rc == 0)); then echo ok
  else echo "FAILED; the last lines of $WORK/log/$name.log:"; tail -25 "$WORK/log/$name.log"; exit 1; fi
}

repo() {  # repo NAME: the git directory of NAME, cloned from GitHub if none was given
  local n=$1
  if [[ -z ${SRC[$n]:-} ]]; then
    local dest=$WORK/git/$n.git
    [[ -d $dest ]] || git clone -q --bare "https://github.com/${UPSTREAM[$n]}.git" "$dest" \
      || die "cannot clone ${UPSTREAM[$n]} (no internet? pass a local copy of '$n')"
    SRC[$n]=$dest
  fi
  echo "${SRC[$n]}"
}

checkout() {  # checkout NAME REF DEST: a fresh working copy of repository NAME at REF
  local from; from=$(repo "$1")
  rm -rf "$3"; git clone -q --no-checkout "$from" "$3"; git -C "$3" checkout -q "$2"
}

submodule() {  # submodule TREE PATH NAME: fill a submodule from repository NAME at the pinned commit
  checkout "$3" "$(git -C "$1" ls-tree HEAD "$2" | awk '{print $3}')" "$1/$2"
}

apt_deps() {
  apt-get update -q
  local tofino=()
  ((TOFINO)) && tofino=(rapidjson-dev libboost-all-dev)
  ((TOFINO || TESTGEN)) && tofino+=(unzip)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    build-essential autoconf automake libtool pkg-config git cmake bison flex python3 python3-pip \
    libboost-dev libboost-graph-dev libboost-iostreams-dev libfl-dev libgc-dev libgmp-dev \
    libboost-test-dev libboost-program-options-dev libboost-system-dev \
    libboost-filesystem-dev libboost-thread-dev libevent-dev libssl-dev libpcap-dev \
    libjudy-dev libreadline-dev libnanomsg-dev libxxhash-dev libjsoncpp-dev libffi-dev \
    libtool-bin python3-dev python3-thrift libthrift-dev thrift-compiler libprotoc-dev \
    libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler "${tofino[@]}"
}

build_pi() {
  local d=$WORK/PI
  checkout PI HEAD "$d"
  submodule "$d" proto/p4runtime p4runtime
  submodule "$d" proto/openconfig/gnmi gnmi
  submodule "$d" third_party/uthash uthash
  submodule "$d" third_party/googletest googletest
  cd "$d" && ./autogen.sh
  ./configure --prefix="$PREFIX" --with-proto --without-internal-rpc --without-cli --without-bmv2
  make -j"$JOBS" && make install && ldconfig
}

build_bmv2() {  # build_bmv2 DEST [configure arguments]
  local d=$1; shift
  checkout behavioral-model "$BMV2_TAG" "$d"
  cd "$d" && ./autogen.sh
  # --with-thrift reaches targets/simple_switch_grpc, whose own default is no Thrift server
  ./configure --with-pi --with-thrift "$@"
  make -j"$JOBS" && make install && ldconfig
}

p4c_sources() {  # p4c_sources DEST: p4c at its tag, and the sources its CMake would fetch
  local d=$1
  checkout p4c "$P4C_TAG" "$d"
  # GCC 12's std::erase_if hands its predicate a const element
  sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' \
    "$d/ir/visitor.cpp"
  [[ -d $WORK/abseil ]] || checkout abseil-cpp "$ABSL_TAG" "$WORK/abseil"
  [[ -d $WORK/protobuf ]] || checkout protobuf "$PROTOBUF_TAG" "$WORK/protobuf"
  local pin; pin=$(sed -n 's/^ *GIT_TAG *\([0-9a-f]\{40\}\).*/\1/p' "$d/CMakeLists.txt" | head -1)
  [[ -d $WORK/p4runtime-$pin ]] || checkout p4runtime "$pin" "$WORK/p4runtime-$pin"
  P4RUNTIME_SRC=$WORK/p4runtime-$pin
}

inja_sources() {  # inja_sources TREE: the template library p4testgen's CMake would fetch, at its pin
  local pin
  pin=$(sed -n 's/^ *GIT_TAG *\([0-9a-f]\{40\}\).*/\1/p' "$1/backends/p4tools/modules/testgen/CMakeLists.txt")
  [[ -d $WORK/inja-$pin ]] || checkout inja "$pin" "$WORK/inja-$pin"
  INJA_SRC=$WORK/inja-$pin
}

p4c_tree() {  # p4c_tree DEST [FN]: p4c's sources in DEST (FN adds to them), or the tree an earlier run left
  # a build takes hours and sessions end mid-build: a re-run keeps the prepared tree and its objects
  local d=$1 stamp=$1/.sources-$P4C_TAG${2:+-$2}
  if [[ -f $stamp && -f $d/build/CMakeCache.txt ]]; then
    echo "resuming the build in $d/build"
    P4RUNTIME_SRC=$(cat "$stamp")
  else
    p4c_sources "$d"
    [[ -z ${2:-} ]] || "$2" "$d"
    echo "$P4RUNTIME_SRC" >"$stamp"
  fi
  ((!TESTGEN)) || { inja_sources "$d"; testgen_fixes "$d"; }
  mkdir -p "$d/build"
}

# p4testgen's Tofino targets, mended for hina's TNA program (what and why: the patch's head): applied to the
# tree once (idempotent; `make` rebuilds the files it changes), and the installed p4testgen marked with the
# patch's digest, which tools/testgen.py and testgen_installed require of the tofino target's.
TESTGEN_PATCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/p4testgen-tofino.patch
testgen_fixes() {
  patch -d "$1" -p1 -R --dry-run --silent <"$TESTGEN_PATCH" >/dev/null 2>&1 || patch -d "$1" -p1 --silent <"$TESTGEN_PATCH"
}
testgen_digest() { sha256sum "$TESTGEN_PATCH" | cut -c1-12; }

z3_wheel() {  # Z3 4.8.14 <= version < 4.12 for the Tofino back end and p4testgen (Debian 12 has 4.8.12)
  [[ -f $WORK/z3/z3/lib/libz3.so ]] && return
  rm -rf "$WORK/z3" && mkdir -p "$WORK/z3"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$WORK/z3" "$Z3_WHEEL"
  unzip -q -o "$WORK"/z3/z3_solver-*.whl -d "$WORK/z3"
  test -f "$WORK/z3/z3/lib/libz3.so" && test -f "$WORK/z3/z3/include/z3.h"
}

# testgen_args TARGET LIBDIR: CMake arguments for p4testgen with TARGET alone (or none without
# --testgen); its Z3 is found in LIBDIR once installed
testgen_args() {
  TESTGEN_ARGS=(-DENABLE_TEST_TOOLS=OFF)
  ((TESTGEN)) || return 0
  local z3=$WORK/z3/z3 t
  TESTGEN_ARGS=(-DENABLE_TEST_TOOLS=ON -DENABLE_TOOLS_MODULE_SMITH=OFF -DUSE_PREINSTALLED_Z3=ON
    -DZ3_INCLUDE_DIR="$z3/include" -DZ3_LIBRARY="$z3/lib/libz3.so" -DCMAKE_BUILD_RPATH="$z3/lib"
    -DCMAKE_INSTALL_RPATH="$2" -DFETCHCONTENT_SOURCE_DIR_INJA="$INJA_SRC")
  for t in bmv2 ebpf pna tofino; do [[ $t == "$1" ]] || TESTGEN_ARGS+=(-DENABLE_TOOLS_TARGET_${t^^}=OFF); done
}

# install_testgen TREE PREFIX LIBDIR TARGET ARCH: p4testgen into PREFIX/bin (p4tools installs it into the build
# tree only), its Z3 into LIBDIR, its testgen.p4 beside p4c's includes; then it runs for TARGET and ARCH
install_testgen() {
  ((TESTGEN)) || return 0
  local b=$1/build/backends/p4tools/modules/testgen
  mkdir -p "$3" "$2/share/p4c/p4include"
  cp "$WORK/z3/z3/lib/libz3.so" "$3/"
  install -m 755 "$b/p4testgen" "$2/bin/p4testgen"
  cp "$1/backends/p4tools/modules/testgen/p4include/testgen.p4" "$2/share/p4c/p4include/"
  testgen_digest >"$2/share/p4c/p4testgen-patch"
  testgen_installed "$2" "$4" "$5"
}

P4C_COMMON=(-DCMAKE_BUILD_TYPE=Release -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF
  -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_P4TEST=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_GTESTS=OFF
  -DENABLE_DOCS=OFF -DP4C_USE_PREINSTALLED_BDWGC=ON -DFETCHCONTENT_FULLY_DISCONNECTED=ON)

build_p4c() {
  local d=$WORK/p4c
  p4c_tree "$d"
  testgen_args bmv2 "$PREFIX/lib/p4testgen"
  cd "$d/build"
  cmake .. "${P4C_COMMON[@]}" "${TESTGEN_ARGS[@]}" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DENABLE_BMV2=ON \
    -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$WORK/abseil" -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$WORK/protobuf" \
    -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$P4RUNTIME_SRC"
  make -j"$JOBS" && make install
  install_testgen "$d" "$PREFIX" "$PREFIX/lib/p4testgen" bmv2 v1model
}

tofino_deps() {
  # what the back end's build scripts import, in the python3 its CMake finds
  python3 -m pip install -q jsl==0.2.4 jsonschema pyyaml pyinstaller
}

spdlog_sources() {  # spdlog's CMake file looks in third_party/ before it tries to download
  checkout spdlog "$SPDLOG_TAG" "$1/backends/tofino/third_party/spdlog"
}

build_tofino() {
  local d=$WORK/p4c-tofino z3=$WORK/z3/z3
  p4c_tree "$d" spdlog_sources
  testgen_args tofino "$TOFINO_PREFIX/lib"
  mkdir -p "$TOFINO_PREFIX/lib" && cp "$z3/lib/libz3.so" "$TOFINO_PREFIX/lib/"
  cd "$d/build"
  cmake .. "${P4C_COMMON[@]}" "${TESTGEN_ARGS[@]}" -DCMAKE_INSTALL_PREFIX="$TOFINO_PREFIX" -DENABLE_BMV2=OFF \
    -DENABLE_TOFINO=ON -DUSE_PREINSTALLED_Z3=ON -DZ3_INCLUDE_DIR="$z3/include" -DZ3_LIBRARY="$z3/lib/libz3.so" \
    -DCMAKE_BUILD_RPATH="$z3/lib" -DCMAKE_INSTALL_RPATH="$TOFINO_PREFIX/lib" \
    -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$WORK/abseil" -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$WORK/protobuf" \
    -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$P4RUNTIME_SRC"
  LD_LIBRARY_PATH=$z3/lib make -j"$JOBS" && make install
  patch_tofino_driver
  install_testgen "$d" "$TOFINO_PREFIX" "$TOFINO_PREFIX/lib" tofino tna
}

# The p4c driver of v1.2.5.16 hands the Tofino assembler's path to " ".join() and str.find() as a
# pathlib.Path under Python 3.11 ("'PosixPath' object has no attribute 'find'" once the back end has
# compiled): make both take it as text.  Idempotent.
patch_tofino_driver() {
  local src=$TOFINO_PREFIX/share/p4c/p4c_src
  sed -i "s|        if cmd\[0\].find('/') != 0 and (find_bin(cmd\[0\]) == None):|        if str(cmd[0]).find('/') != 0 and (find_bin(str(cmd[0])) == None):|" "$src/barefoot.py"
  sed -i 's|        args = shlex.split(" ".join(cmd))|        args = shlex.split(" ".join(str(c) for c in cmd))|' "$src/driver.py"
}

# has TOOL TEXT: TOOL runs and its --version names TEXT.  The output is taken whole before grep reads
# it: under pipefail, `TOOL | grep -q` fails with SIGPIPE (141) whenever grep exits before TOOL's
# last write, and an installed tool would read as missing.
has() { command -v "$1" >/dev/null && grep -q "$2" <<<"$("$1" --version 2>&1)"; }
# bmv2_installed BIN: BIN is BMv2 $BMV2_TAG with its Thrift server (the controller's register resets)
bmv2_installed() { has "$1" "$BMV2_TAG" && grep -q thrift-port <<<"$("$1" --help 2>&1)"; }
# testgen_installed PREFIX TARGET ARCH: without --testgen, true; with it, PREFIX/bin/p4testgen runs for TARGET (it
# refuses even --version without a target and an architecture), and for tofino, built with p4testgen-tofino.patch
testgen_installed() {
  ((!TESTGEN)) || { "$1/bin/p4testgen" --target "$2" --arch "$3" --version >/dev/null 2>&1 \
    && { [[ $2 != tofino ]] || [[ $(cat "$1/share/p4c/p4testgen-patch" 2>/dev/null) == "$(testgen_digest)" ]]; }; }
}

step apt-packages apt_deps
if ((BMV2)); then
  if grep -q libpiprotogrpc <<<"$(ldconfig -p)"; then echo "PI: installed, skipped"; else step PI build_pi; fi
  if bmv2_installed "$PREFIX/bin/simple_switch_grpc"; then echo "BMv2 $BMV2_TAG with Thrift: installed, skipped"
  else step bmv2 build_bmv2 "$WORK/bmv2" --prefix="$PREFIX"; fi
  if [[ -n $FAST_PREFIX ]] && bmv2_installed "$FAST_PREFIX/bin/simple_switch_grpc"; then
    echo "-O3 BMv2 $BMV2_TAG in $FAST_PREFIX: installed, skipped"
  elif [[ -n $FAST_PREFIX ]]; then
    step bmv2-fast build_bmv2 "$WORK/bmv2-fast" --prefix="$FAST_PREFIX" \
      --disable-logging-macros --disable-elogger CXXFLAGS="-O3" CFLAGS="-O3"
  fi
  ((TESTGEN)) && step z3 z3_wheel
  if has "$PREFIX/bin/p4c" "${P4C_TAG#v}" && testgen_installed "$PREFIX" bmv2 v1model; then
    echo "p4c ${P4C_TAG#v}$( ((TESTGEN)) && echo ' and p4testgen'): installed, skipped"
  else step p4c build_p4c; fi
  thrift_module() { python3 -c 'import thrift' 2>/dev/null || python3 -m pip install -q thrift; }
  step thrift-module thrift_module
fi
if ((TOFINO)); then
  if has "$TOFINO_PREFIX/bin/p4c" "${P4C_TAG#v}" && [[ -x $TOFINO_PREFIX/bin/p4c-barefoot ]] \
      && testgen_installed "$TOFINO_PREFIX" tofino tna; then
    echo "p4c ${P4C_TAG#v} with the Tofino back end$( ((TESTGEN)) && echo ' and p4testgen'): installed, skipped"
    patch_tofino_driver
  else
    step tofino-deps tofino_deps
    step z3 z3_wheel
    step p4c-tofino build_tofino
  fi
fi

echo "done in $(((SECONDS - T0) / 60)) min:"
if ((BMV2)); then
  "$PREFIX/bin/p4c" --version | head -1
  "$PREFIX/bin/simple_switch_grpc" --version
  ((!TESTGEN)) || echo "p4testgen's bmv2 target: $PREFIX/bin/p4testgen"
  echo "A virtual environment needs the thrift module too: .venv/bin/pip install thrift"
fi
if ((TOFINO)); then
  "$TOFINO_PREFIX/bin/p4c" --version | head -1
  ((!TESTGEN)) || echo "p4testgen's tofino target: $TOFINO_PREFIX/bin/p4testgen"
  echo "Tofino compiler in $TOFINO_PREFIX/bin (make tofino finds it there, or set P4C_TOFINO)"
fi
