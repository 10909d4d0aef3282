# opspad's image: compiled in a build stage that has the dev dependencies (TypeScript), run from a
# runtime stage that installs the production dependencies only, as a user without privileges.

FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are copied; the build runs below.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

FROM node:20-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY bin ./bin
COPY drizzle ./drizzle
COPY --from=build /app/dist ./dist
# The embedded database (used when DATABASE_URL is unset) lives in /app/.opspad: the one place
# the unprivileged user writes.
RUN mkdir -p /app/.opspad && chown node:node /app/.opspad
USER node
EXPOSE 3000
CMD ["node", "bin/opspad.js", "start"]
