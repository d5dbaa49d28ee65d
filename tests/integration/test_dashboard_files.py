"""The dashboard's static files (node/http/ui/) on a live node: public, typed, framed by no one."""

from __future__ import annotations


def test_dashboard_files_need_no_token(cluster):
    url = cluster.url(0)
    for path, kind in [
        ("/ui", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/vendor/uPlot.iife.min.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ]:
        r = cluster.http.get(f"{url}{path}")
        assert r.status == 200, path
        assert r.headers["Content-Type"].startswith(kind)
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    missing = cluster.http.get(f"{url}/ui/nothing.js")  # under /ui everything is public: a plain 404
    assert (missing.status, missing.body["error"]["code"]) == (404, "not_found")
    assert cluster.http.get(f"{url}/v1/nothing").status == 401  # elsewhere the token comes first
