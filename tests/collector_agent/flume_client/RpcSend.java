import java.io.BufferedReader;
import java.io.FileReader;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.flume.Event;
import org.apache.flume.EventDeliveryException;
import org.apache.flume.FlumeException;
import org.apache.flume.api.RpcClient;
import org.apache.flume.api.RpcClientFactory;
import org.apache.flume.event.EventBuilder;

/**
 * Sends events through Flume's SDK:
 * {@code RpcSend <client.properties> <events> <batch> [<body bytes> [<pause at>]]}.
 * The client is whatever {@code RpcClientFactory.getInstance(properties)} makes of the file
 * (default Avro, failover, load balancing). Event n has the headers {@code n = <n>} and
 * {@code tag = välue-ß} and the body {@link #body(int, int)}. A batch the client fails to deliver is
 * sent again on a new client (at least once). It prints {@code ready} before its first event
 * (the JVM started, its classes loaded), and last
 * {@code sent <events> retried <batches>}. With {@code <pause at>}, once that many events are
 * delivered it prints {@code paused} and waits for a line on its standard input.
 */
public final class RpcSend {
  private RpcSend() {}

  /** {@code size} bytes (1 + n % 200 if size is 0), byte i being (n * 31 + i) & 0xff. */
  static byte[] body(int n, int size) {
    byte[] body = new byte[size > 0 ? size : 1 + n % 200];
    for (int i = 0; i < body.length; i++) {
      body[i] = (byte) ((n * 31 + i) & 0xff);
    }
    return body;
  }

  public static void main(String[] args) throws Exception {
    Properties properties = new Properties();
    try (Reader reader = new FileReader(args[0], StandardCharsets.UTF_8)) {
      properties.load(reader);
    }
    int events = Integer.parseInt(args[1]);
    int batchSize = Integer.parseInt(args[2]);
    int bodySize = args.length > 3 ? Integer.parseInt(args[3]) : 0;
    int pauseAt = args.length > 4 ? Integer.parseInt(args[4]) : -1;
    BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    long deadline = System.nanoTime() + 300_000_000_000L;
    int retried = 0;
    System.out.println("ready");
    System.out.flush();
    RpcClient client = null;
    for (int start = 0; start < events; start += batchSize) {
      List<Event> batch = new ArrayList<>();
      for (int n = start; n < Math.min(events, start + batchSize); n++) {
        Map<String, String> headers = new HashMap<>();
        headers.put("n", Integer.toString(n));
        headers.put("tag", "v\u00e4lue-\u00df");
        batch.add(EventBuilder.withBody(body(n, bodySize), headers));
      }
      while (true) {
        try {
          if (client == null) {
            client = RpcClientFactory.getInstance(properties);
          }
          client.appendBatch(batch);
          break;
        } catch (EventDeliveryException | FlumeException e) {
          if (System.nanoTime() > deadline) {
            throw e;
          }
          retried++;
          System.out.println("retry at " + start + ": " + e);
          if (client != null) {
            client.close();
            client = null;
          }
          Thread.sleep(200);
        }
      }
      if (start < pauseAt && pauseAt <= start + batch.size()) {
        System.out.println("paused");
        System.out.flush();
        input.readLine();
      }
    }
    if (client != null) {
      client.close();
    }
    System.out.println("sent " + events + " retried " + retried);
  }
}
