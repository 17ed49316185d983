# aptcache.sh, sourced: fetch PKG downloads a Debian package into $debs once.
# The caller sets debs (the cache directory, which it has locked) and log and die.

# fetch PKG: prints the path of PKG's .deb in the cache, downloading it only when the
# candidate version is not there yet. Without apt metadata (offline CI cache), it falls
# back to the newest cached .deb of that package.
fetch() {
  # PKG may name a foreign architecture (busybox-static:arm64); its file is
  # PKG-NAME_VERSION_ARCH.deb, and the cache fallback must not take another
  # architecture's build of the same package.
  local pkg=$1 name=${1%%:*} arch file=""
  case $pkg in *:*) arch=${pkg#*:} ;; *) arch=$(dpkg --print-architecture) ;; esac
  # apt-get download names files PKG_VERSION_ARCH.deb with the epoch colon as %3a.
  file=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null |
    awk -v p="$name" '/^Version:/{v=$2} /^Architecture:/{a=$2} END{if(v!=""){sub(/:/,"%3a",v); print p "_" v "_" a ".deb"}}') || true
  if [ -n "$file" ] && [ -s "$debs/$file" ]; then
    echo "$debs/$file"; return
  fi
  if [ -n "$file" ]; then
    log "downloading $pkg"
    # apt's sandbox user cannot write to a root-owned cache; download as root, quietly.
    (cd "$debs" && apt-get -q -o APT::Sandbox::User=root download "$pkg" >&2) || true
    if [ -s "$debs/$file" ]; then echo "$debs/$file"; return; fi
  fi
  file=$( (ls -1 "$debs/${name}"_*_"$arch".deb "$debs/${name}"_*_all.deb 2>/dev/null || true) | sort -V | tail -n1)
  [ -n "$file" ] || die "cannot get package $pkg: apt-get download failed and nothing is cached in $debs (run apt-get update?)"
  log "using cached $file"
  echo "$file"
}
