//! The forward-auth endpoint `/v1/auth/{rule}` on the real binary, as Traefik ForwardAuth and
//! Caddy `forward_auth` call it: attributes from prefixed and mapped headers, the client's
//! address through trusted proxies only, an empty body with the rate-limit headers, and the
//! denial status from the config or the query.

use crate::common;

use common::Server;

const CONFIG: &str = "\
forward_auth:
  headers: { x-user-id: member }
  client_ip: { trusted: [127.0.0.1/32] }
rules:
  per_member:
    limits:
      - { by: [member], rate: 2/1m, algorithm: sliding_log }
  per_promo:
    limits:
      - { by: [promo_code], rate: 1/1m, algorithm: sliding_log }
  per_ip:
    limits:
      - { by: [ip], rate: 2/1m, algorithm: sliding_log }
  costly:
    limits:
      - { by: [member], rate: 10/1m, algorithm: sliding_log }
";

async fn auth(server: &Server, path: &str, headers: &[(&str, &str)]) -> common::Answer {
    let mut request = server.http.get(server.url(path));
    for &(name, value) in headers {
        request = request.header(name, value);
    }
    server.send(request).await
}

#[tokio::test]
async fn mapped_headers_are_attributes_and_a_denial_is_429_with_headers_and_no_body() {
    let server = Server::start(CONFIG);
    let user = [("x-user-id", "m1")];
    for remaining in ["1", "0"] {
        let answer = auth(&server, "/v1/auth/per_member", &user).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.text, "");
        assert_eq!(answer.header("x-ratelimit-remaining"), Some(remaining));
        assert_eq!(
            answer.header("ratelimit-policy"),
            Some("\"per_member\";q=2;w=60")
        );
    }
    let denied = auth(&server, "/v1/auth/per_member", &user).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.text, "");
    assert!(denied.header("retry-after").is_some());
    // nginx asks for a status auth_request accepts.
    let for_nginx = auth(&server, "/v1/auth/per_member?denied_status=403", &user).await;
    assert_eq!(for_nginx.status, 403);
    assert!(for_nginx.header("retry-after").is_some());
    // Another member is counted apart; any method works.
    let other = server
        .send(
            server
                .http
                .post(server.url("/v1/auth/per_member"))
                .header("x-user-id", "m2"),
        )
        .await;
    assert_eq!(other.status, 200);
}

#[tokio::test]
async fn prefixed_headers_are_attributes() {
    let server = Server::start(CONFIG);
    let promo = [("X-Sluice-Promo-Code", "spring")];
    assert_eq!(
        auth(&server, "/v1/auth/per_promo", &promo).await.status,
        200
    );
    assert_eq!(
        auth(&server, "/v1/auth/per_promo", &promo).await.status,
        429
    );
    let other = [("X-Sluice-Promo-Code", "summer")];
    assert_eq!(
        auth(&server, "/v1/auth/per_promo", &other).await.status,
        200
    );
}

#[tokio::test]
async fn the_client_ip_comes_from_trusted_proxies_and_cannot_be_set_by_a_header() {
    let server = Server::start(CONFIG);
    // From the trusted proxy (127.0.0.1): the nearest untrusted hop is the client.
    let via = |client: &'static str| [("x-forwarded-for", client)];
    let forged_forward = [("x-forwarded-for", "6.6.6.6, 203.0.113.5")];
    assert_eq!(
        auth(&server, "/v1/auth/per_ip", &via("203.0.113.5"))
            .await
            .status,
        200
    );
    assert_eq!(
        auth(&server, "/v1/auth/per_ip", &forged_forward)
            .await
            .status,
        200
    );
    assert_eq!(
        auth(&server, "/v1/auth/per_ip", &via("203.0.113.5"))
            .await
            .status,
        429
    );
    assert_eq!(
        auth(&server, "/v1/auth/per_ip", &via("203.0.113.6"))
            .await
            .status,
        200
    );
    // An `X-Sluice-Ip` header never replaces the address.
    let spoof = [
        ("x-forwarded-for", "203.0.113.5"),
        ("x-sluice-ip", "192.0.2.1"),
    ];
    assert_eq!(auth(&server, "/v1/auth/per_ip", &spoof).await.status, 429);
}

#[tokio::test]
async fn cost_from_the_query_and_clear_errors() {
    let server = Server::start(CONFIG);
    let user = [("x-user-id", "m1")];
    let answer = auth(&server, "/v1/auth/costly?cost=4", &user).await;
    assert_eq!(answer.header("x-ratelimit-remaining"), Some("6"));
    let look = auth(&server, "/v1/auth/costly?cost=0", &user).await;
    assert_eq!(
        (look.status, look.header("x-ratelimit-remaining")),
        (200, Some("6"))
    );

    let unknown = auth(&server, "/v1/auth/nope", &user).await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.error().contains("nope"));
    let missing = auth(&server, "/v1/auth/per_member", &[]).await;
    assert_eq!(missing.status, 400);
    assert!(missing.error().contains("member"), "{}", missing.error());
    let status = auth(&server, "/v1/auth/per_member?denied_status=500", &user).await;
    assert_eq!(status.status, 400);
    assert!(status.error().contains("denied_status"));
    let unknown_param = auth(&server, "/v1/auth/per_member?colour=red", &user).await;
    assert_eq!(unknown_param.status, 400);
}

#[tokio::test]
async fn the_denial_status_can_be_set_in_the_config() {
    let config = CONFIG.replace(
        "  client_ip: { trusted: [127.0.0.1/32] }\n",
        "  client_ip: { trusted: [127.0.0.1/32] }\n  denied_status: 403\n",
    );
    let server = Server::start(&config);
    let user = [("x-user-id", "m9")];
    auth(&server, "/v1/auth/per_member", &user).await;
    auth(&server, "/v1/auth/per_member", &user).await;
    assert_eq!(
        auth(&server, "/v1/auth/per_member", &user).await.status,
        403
    );
    let answer = auth(&server, "/v1/auth/per_member?denied_status=429", &user).await;
    assert_eq!(answer.status, 429);
}
