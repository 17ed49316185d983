package harness

import "fmt"

// NginxConf is the nginx configuration every bench serves files with:
// one server on listen (ADDR:PORT) with root, sendfile on, access log off,
// and every temporary path under prefix so that nothing of the system's
// nginx is touched. Run it with nginx -p PREFIX -c FILE.
func NginxConf(prefix, listen, root string) string {
	return fmt.Sprintf(`daemon off;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  default_type application/octet-stream;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s;
  scgi_temp_path %[1]s;
  server {
    listen %[2]s;
    root %[3]s;
  }
}
`, prefix, listen, root)
}
