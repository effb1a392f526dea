-- report.lua — wrk script: after the run, print one line of JSON (prefixed so the
-- driver can find it among wrk's own output) with the figures the bench reports.
done = function(summary, latency, requests)
  local s = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_s":%.3f,"rps":%.1f,"bytes":%d,' ..
    '"lat_mean_ms":%.3f,"lat_p50_ms":%.3f,"lat_p90_ms":%.3f,"lat_p99_ms":%.3f,"lat_max_ms":%.3f,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
    summary.requests, s, summary.requests / s, summary.bytes,
    latency.mean / 1000, latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    e.connect, e.read, e.write, e.status, e.timeout))
end
