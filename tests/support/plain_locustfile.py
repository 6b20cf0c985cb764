"""Any locustfile (not locust-llm's): plain HTTP requests, stepped by a shape; for the report's fallback path."""

from locust import FastHttpUser, LoadTestShape, constant, task


class Plain(FastHttpUser):
    wait_time = constant(0.05)

    @task
    def health(self):
        self.client.get("/health")


class Steps(LoadTestShape):
    steps = ((2, 8), (6, 16))

    def tick(self):
        t = self.get_run_time()
        for users, until in self.steps:
            if t < until:
                return users, 100
        return None
