# Prints each failed test of a TAP report (not the suites that failed only through them): its name, where it is,
# and the first three lines of its error. test/run.sh adds them to its closing summary.
/^ *not ok / { name = $0; sub(/^ *not ok [0-9]+ - /, "", name); at = ""; error = ""; kind = ""; open = 1; next }
!open { next }
/^ *location: / {
  at = $0
  sub(/^ *location: '?/, "", at)
  sub(/'$/, "", at)
  if (index(at, root) == 1) at = substr(at, length(root) + 1)
  next
}
/^ *failureType: / { kind = $0; next }
# A block error's lines are indented deeper than its key; the first three that are not blank are kept.
/^ *error: / {
  error = $0
  sub(/^ *error: /, "", error)
  if (error !~ /^[|>]/) next
  key = match($0, /[^ ]/)
  error = ""
  lines = 0
  while ((getline line) > 0 && (line ~ /^ *$/ || match(line, /[^ ]/) > key)) {
    sub(/^ */, "", line)
    if (line != "" && ++lines <= 3) error = error (error == "" ? "" : " ") line
  }
  $0 = line
}
/^ *\.\.\.$/ {
  open = 0
  if (kind ~ /subtestsFailed/) next
  if (++shown > 10) next
  print "  not ok: " name
  if (at != "") print "    at " at
  if (error != "") print "    " error
}
END { if (shown > 10) print "  and " (shown - 10) " more failed tests" }
