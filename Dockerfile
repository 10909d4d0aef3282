FROM node:20-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund --omit=dev
COPY bin ./bin
COPY src ./src
COPY drizzle ./drizzle
COPY tsconfig.json ./
ENV HOST=0.0.0.0 PORT=3000 NODE_ENV=production
EXPOSE 3000
CMD ["node", "bin/opspad.js", "start"]
