# The worker image: compiled TypeScript on Node 24 LTS. Workflows are bundled when the worker starts.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx tsc -p tsconfig.build.json

FROM node:24-bookworm-slim
ENV NODE_ENV=production
# git for the shell tool's git commands; tini reaps the processes tools start (PID 1 duty); bubblewrap
# is the kernel sandbox every tool process runs in (it needs the container settings in docker-compose.yml).
RUN apt-get update && apt-get install -y --no-install-recommends git tini bubblewrap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/dist ./dist
COPY examples ./examples
# The agents' workspaces (a volume in compose): created here and owned by the user the worker runs as,
# so a fresh named volume inherits that ownership instead of root's.
RUN mkdir -p /workspaces && chown node:node /workspaces
ENV AGENTS_WORKSPACE_ROOT=/workspaces
USER node
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/worker/main.js"]
