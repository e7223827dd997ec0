// A MiniDFSCluster for the tests (tests/servers/hdfs.py): one NameNode and one DataNode on
// 127.0.0.1, data under args[0], NameNode RPC on args[1] (0: a free port). Prints
// "PORT <n>" once the cluster is up, and runs until it is signalled (SIGTERM) or process args[2]
// ends (the test run that started it, killed before it could stop the cluster). The data are a
// test's: nothing is shut down cleanly, the fixture removes the directory.
import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public final class MiniHdfs {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set("hdfs.minidfs.basedir", new File(args[0]).getAbsolutePath());
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setBoolean("dfs.webhdfs.enabled", false);  // no Jersey scan of the jars at startup
    conf.setInt("dfs.replication", 1);
    conf.setLong("dfs.blocksize", 1L << 20);  // small files: small blocks
    conf.setInt("dfs.namenode.handler.count", 16);
    conf.setBoolean("dfs.namenode.edits.noeditlogchannelflush", true);  // a test's data
    // Not dfs.namenode.file.close.num-committed-allowed (HDFS-8999, a close before the
    // DataNodes report the last block): it saves hdfs-native's half-second retry of such a
    // close, but hdfs-native then reads a just-closed file as empty now and then.
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf)
            .numDataNodes(1)
            .nameNodePort(Integer.parseInt(args[1]))
            .nameNodeHttpPort(0)
            .checkDataNodeAddrConfig(true)
            .format(true)
            .build();
    cluster.waitActive();
    System.out.println("PORT " + cluster.getNameNodePort());
    System.out.flush();
    ProcessHandle.of(Long.parseLong(args[2]))
        .ifPresentOrElse(p -> p.onExit().join(), () -> {});
    System.exit(0);
  }
}
