// A Spring Cloud Gateway RateLimiter that asks Sluice: each request's key (from the route's
// KeyResolver) is the attribute `key` of the rule named in the route's config.
//
// Documentation only: this file is not compiled in CI (its Spring dependencies come from Maven
// Central). Dependencies: spring-cloud-starter-gateway (4.x), which brings WebClient and Reactor.
//
//   spring.cloud.gateway.routes[0].filters[0]:
//     name: RequestRateLimiter
//     args: { rate-limiter: "#{@sluiceRateLimiter}", key-resolver: "#{@userKeyResolver}" }
//   sluice.base-url: http://127.0.0.1:8080
//
// On a denial the gateway answers 429 with Sluice's RateLimit, RateLimit-Policy and Retry-After
// headers. When Sluice cannot be asked in time, the request passes (fail open, as the service's
// own `fail: open`); say `failClosed = true` to deny instead.
package example.sluice;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.http.HttpHeaders;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Mono;

@Component("sluiceRateLimiter")
public class SluiceRateLimiter extends AbstractRateLimiter<SluiceRateLimiter.Config> {

    /** Per route: the rule to check, and whether to deny when Sluice does not answer. */
    public static class Config {
        private String rule = "api";
        private boolean failClosed = false;

        public String getRule() { return rule; }
        public Config setRule(String rule) { this.rule = rule; return this; }
        public boolean isFailClosed() { return failClosed; }
        public Config setFailClosed(boolean failClosed) { this.failClosed = failClosed; return this; }
    }

    private static final List<String> PASSED_ON =
        List.of("RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit",
                "X-RateLimit-Remaining", "X-RateLimit-Reset");

    private final WebClient sluice;

    public SluiceRateLimiter(ConfigurationService configurationService,
                             @Value("${sluice.base-url}") String baseUrl) {
        super(Config.class, "sluice-rate-limiter", configurationService);
        this.sluice = WebClient.builder().baseUrl(baseUrl).build();
    }

    @Override
    public Mono<Response> isAllowed(String routeId, String id) {
        Config config = getConfig().getOrDefault(routeId, new Config());
        Map<String, Object> body = Map.of("rule", config.getRule(), "attributes", Map.of("key", id));
        return sluice.post()
            .uri("/v1/check?view=headers")
            .bodyValue(body)
            // 200 allowed, 429 denied: both are answers; any other status is an error to log.
            .exchangeToMono(answer -> {
                int status = answer.statusCode().value();
                Map<String, String> headers = passedOn(answer.headers().asHttpHeaders());
                if (status == 200 || status == 429) {
                    return Mono.just(new Response(status == 200, headers));
                }
                return answer.createException().flatMap(Mono::error);
            })
            .timeout(Duration.ofMillis(250))
            .onErrorResume(error -> Mono.just(new Response(!config.isFailClosed(), Map.of())));
    }

    private static Map<String, String> passedOn(HttpHeaders headers) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String name : PASSED_ON) {
            String value = headers.getFirst(name);
            if (value != null) {
                out.put(name, value);
            }
        }
        return out;
    }
}
