# pairs.awk: one server against another, round by round. Reads lines
# "x y", the two servers' figures in the same round (or repetition), and
# prints "ratio wins n p": the median of x/y over the pairs with y > 0,
# how many of those n pairs had x > y, and the two-sided sign test's p
# for that count if every pair were a coin toss (the servers equal). With
# 5 pairs even 5 wins gives p = 0.06. No pair: "nan 0 0 1".
# Used by bench-nbd.sh (summary lines) and ab-nbd.sh.
$2 > 0 {
  n++; x = $1 / $2
  for (i = n; i > 1 && r[i - 1] > x; i--) r[i] = r[i - 1]
  r[i] = x
  if ($1 > $2) w++
}
END {
  if (!n) { print "nan 0 0 1"; exit }
  med = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
  lo = w < n - w ? w : n - w; t = 0; q = 1
  for (i = 0; i <= lo; i++) { if (i > 0) q = q * (n - i + 1) / i; t += q }
  p = 2 * t / 2 ^ n; if (p > 1) p = 1
  printf "%.6g %d %d %.3f\n", med, w, n, p
}
