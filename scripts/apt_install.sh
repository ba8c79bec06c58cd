# Sourced by the setup scripts: kite_apt_install WHO PACKAGE... installs the
# Debian packages of the list that are not installed yet (nothing, not even
# `apt-get update`, when all are), through sudo unless already root. WHO
# names the calling script in the message.
kite_apt_install() {
  local who="$1"
  shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then return 0; fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "$who: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}
